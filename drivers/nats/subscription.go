package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// minWait is the shortest pull request that waits the driver sends.
const minWait = 50 * time.Millisecond

// DefaultWaitTime is how long one receive waits for a message by default.
const DefaultWaitTime = time.Second

// MaxReasonLen is the most bytes of a dead-letter reason the copy keeps.
const MaxReasonLen = 512

// Headers a dead-letter copy carries, besides the message's own.
const (
	HeaderID       = "wary-id"         // the message's ID
	HeaderKey      = "wary-key"        // its key
	HeaderConsumer = "wary-consumer"   // the consumer that dead-lettered it
	HeaderSeq      = "wary-stream-seq" // its sequence in its stream
)

// SubscriptionOptions configures OpenSubscription and OpenDeadLetters.
// Nil means defaults.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (telemetry, settle
	// timeout).
	broker.SubscriptionOptions
	// Subject is the subject the stream's messages were published to
	// (TopicOptions.Subject): the key is what follows it. Default: as for
	// TopicOptions.Subject.
	Subject string
	// WaitTime is how long one receive waits for a message (a pull
	// request's expiry). Default: DefaultWaitTime.
	WaitTime time.Duration
	// DeadLetterStream names the dead-letter stream. Default:
	// DeadLetterStream(stream).
	DeadLetterStream string
	// NoPrefetch turns prefetching off: no pull request outlives a
	// receive. By default a receive that got as many messages as it asked
	// for sends the next pull request before it returns, and so does an
	// ack (Ack, broker.AckAll; before the acks) when none is outstanding,
	// so that the next receive finds its messages in the client instead
	// of waiting a round trip. The pull asks for the size of the last
	// receive, or for what Subscription.Run holds
	// (RunOptions.MaxOutstanding, through driver.Prefetcher). Prefetched
	// messages are delivered (locked, their AckWait running, counted as a
	// delivery) from the pull on; a receive hands out none whose AckWait
	// passed meanwhile (the server delivers them again), and Close
	// returns those no receive took (-NAK: redelivered at once). A
	// consumer with max_ack_pending 1 never prefetches, nor does
	// OpenDeadLetters.
	NoPrefetch bool

	stated stated
}

// DeadLetterStream is the default name of the dead-letter stream of
// stream: stream + "_DLQ". It captures DeadLetterSubject(stream, "*").
func DeadLetterStream(stream string) string { return stream + "_DLQ" }

// DeadLetterSubject is the subject a consumer's dead letters go to:
// wary.dlq.STREAM.CONSUMER.
func DeadLetterSubject(stream, consumer string) string {
	return "wary.dlq." + stream + "." + consumer
}

// OpenSubscription opens a consumer of the durable pull consumer named
// consumer on stream. Several subscriptions on one consumer are competing
// consumers. The stream and consumer must exist (ErrNotFound), and the
// consumer must acknowledge explicitly (ErrInvalid). Capabilities are
// read from both, and from the dead-letter stream when it exists. js is
// the caller's; ctx bounds the open's requests.
func OpenSubscription(ctx context.Context, js jetstream.JetStream, stream, consumer string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	s, err := openSubscription(ctx, js, stream, consumer, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

// OpenDeadLetters opens a consumer of the dead letters of consumer on
// stream: a durable pull consumer of the same name on the dead-letter
// stream, filtered to DeadLetterSubject(stream, consumer), created with
// the consumer's AckWait when it does not exist. Messages carry their ID,
// key and headers as published, and the reason in the header
// wary-dead-letter-reason. It never prefetches (NoPrefetch). The
// dead-letter stream must exist (ErrNotFound).
func OpenDeadLetters(ctx context.Context, js jetstream.JetStream, stream, consumer string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	var o SubscriptionOptions
	if opts != nil {
		o = *opts
	}
	s, err := openDeadLetters(ctx, js, stream, consumer, o)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &o.SubscriptionOptions), nil
}

func openDeadLetters(ctx context.Context, js jetstream.JetStream, stream, consumer string, o SubscriptionOptions) (*subscription, error) {
	if err := validName("stream", stream); err != nil {
		return nil, err
	}
	if err := validName("consumer", consumer); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, driver.OpenError(driver.Invalid, errors.New("nats: nil JetStream"))
	}
	dlqName := o.DeadLetterStream
	if dlqName == "" {
		dlqName = DeadLetterStream(stream)
	}
	ackWait := 30 * time.Second
	if c, err := js.Consumer(ctx, stream, consumer); err == nil {
		ackWait = c.CachedInfo().Config.AckWait
	}
	subject := DeadLetterSubject(stream, consumer)
	_, err := js.CreateOrUpdateConsumer(ctx, dlqName, jetstream.ConsumerConfig{
		Durable: consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, FilterSubject: subject, MaxDeliver: -1,
	})
	if err != nil {
		return nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: dead-letter consumer %s on stream %s: %w", consumer, dlqName, err))
	}
	// Dead letters are read to be looked at or replayed, a few at a
	// time: a prefetch would deliver (and count) messages no one asked
	// to see.
	o.Subject, o.DeadLetterStream, o.NoPrefetch = subject, "-", true
	s, err := openSubscription(ctx, js, dlqName, consumer, o)
	if err != nil {
		return nil, err
	}
	s.deadLetters = true
	return s, nil
}

func openSubscription(ctx context.Context, js jetstream.JetStream, stream, consumer string, o SubscriptionOptions) (*subscription, error) {
	if js == nil {
		return nil, driver.OpenError(driver.Invalid, errors.New("nats: nil JetStream"))
	}
	if err := validName("stream", stream); err != nil {
		return nil, err
	}
	if err := validName("consumer", consumer); err != nil {
		return nil, err
	}
	if o.WaitTime < 0 {
		return nil, driver.OpenError(driver.Invalid, errors.New("nats: negative WaitTime"))
	}
	if o.WaitTime == 0 {
		o.WaitTime = DefaultWaitTime
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: stream %q: %w", stream, err))
	}
	scfg := st.CachedInfo().Config
	cons, err := st.Consumer(ctx, consumer)
	if err != nil {
		return nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: consumer %q of stream %q: %w", consumer, stream, err))
	}
	ccfg := cons.CachedInfo().Config
	if ccfg.DeliverSubject != "" {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("nats: consumer %q is a push consumer; the driver reads a durable pull consumer", consumer))
	}
	subject := o.Subject
	if subject == "" {
		subject = defaultSubject(scfg)
	}
	var dlq *deadLetterTarget
	if o.DeadLetterStream != "-" {
		name := o.DeadLetterStream
		if name == "" {
			name = DeadLetterStream(stream)
		}
		t := &deadLetterTarget{stream: name, subject: DeadLetterSubject(stream, consumer)}
		ds, err := js.Stream(ctx, name)
		switch {
		case err == nil && captures(ds.CachedInfo().Config, t.subject):
			dlq = t
		case err == nil:
			return nil, driver.OpenError(driver.Invalid, fmt.Errorf("nats: dead-letter stream %s does not capture %s", name, t.subject))
		case classify(err).Code != driver.NotFound:
			return nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: dead-letter stream %q: %w", name, err))
		}
	}
	caps, err := subCaps(scfg, ccfg, dlq, o.stated)
	if err != nil {
		return nil, err
	}
	s := &subscription{
		js: js, nc: js.Conn(), cons: cons, stream: stream, consumer: consumer, subject: subject,
		caps: caps, ackWait: ccfg.AckWait, maxDeliver: ccfg.MaxDeliver, maxAckPending: ccfg.MaxAckPending, dlq: dlq, wait: o.WaitTime,
		holds: map[*ackID]time.Time{}, prefetch: !o.NoPrefetch && ccfg.MaxAckPending != 1, epoch: time.Now(),
	}
	s.bg, s.stopBG = context.WithCancel(context.Background())
	return s, nil
}

type subscription struct {
	js            jetstream.JetStream
	nc            *natsgo.Conn
	cons          jetstream.Consumer
	stream        string
	consumer      string
	subject       string
	caps          capability.Subscription
	ackWait       time.Duration
	maxDeliver    int
	maxAckPending int
	dlq           *deadLetterTarget
	wait          time.Duration
	// deadLetters: the subscription reads a dead-letter stream (ID, key
	// and reason from the copy's headers).
	deadLetters bool
	own         *natsgo.Conn // the URL opener's connection, closed with the subscription

	bg     context.Context
	stopBG context.CancelFunc
	wg     sync.WaitGroup
	// epoch is the origin of clock, the deliveries' deadlines' clock.
	epoch time.Time

	// holds are the deliveries whose lock ExtendLocks was asked to hold
	// longer than AckWait, with until when; the holder renews them.
	mu      sync.Mutex
	holds   map[*ackID]time.Time
	holding bool

	// prefetch (unless SubscriptionOptions.NoPrefetch): a full receive or
	// SendAcks sends a pull of runMax (SetPrefetch's), or else lastMax (the
	// last receive's), kept in pre until a receive or Close takes it.
	prefetch bool
	lastMax  atomic.Int64
	runMax   atomic.Int64
	preMu    sync.Mutex
	pre      *prefetched
	taking   bool // a receive took pre and has not put back what it left
}

// prefetched is a prefetch pull request, and when it was sent; or (b nil)
// the messages of one a receive left.
type prefetched struct {
	b     jetstream.MessageBatch
	n     int // the messages b asked for
	msgs  []jetstream.Msg
	start time.Time
}

// takePrefetch returns the prefetched pull, if any, and forgets it; no
// other is sent until putBack.
func (s *subscription) takePrefetch() *prefetched {
	if !s.prefetch {
		return nil
	}
	s.preMu.Lock()
	defer s.preMu.Unlock()
	p := s.pre
	s.pre, s.taking = nil, p != nil
	return p
}

// putBack ends a takePrefetch, keeping p (when not nil: what the receive
// left) for the next receive.
func (s *subscription) putBack(p *prefetched) {
	s.preMu.Lock()
	defer s.preMu.Unlock()
	if p != nil {
		s.pre = p
	}
	s.taking = false
}

// startPrefetch sends a pull request that does not wait, of runMax or the
// size of the last receive, unless one is outstanding or the subscription
// closed. Its messages are locked from now on.
func (s *subscription) startPrefetch() {
	n := int(s.runMax.Load())
	if n < 1 {
		n = int(s.lastMax.Load())
	}
	if s.maxAckPending > 0 {
		n = min(n, s.maxAckPending)
	}
	if n < 1 {
		return
	}
	s.preMu.Lock()
	defer s.preMu.Unlock()
	if s.pre != nil || s.taking || s.bg.Err() != nil {
		return
	}
	start := time.Now()
	if b, err := s.cons.FetchNoWait(n); err == nil {
		s.pre = &prefetched{b: b, n: n, start: start}
	}
}

// clock reads t (which must carry a monotonic reading, as time.Now's do)
// as nanoseconds since the subscription opened, on the monotonic clock.
func (s *subscription) clock(t time.Time) int64 { return int64(t.Sub(s.epoch)) }

// SetPrefetch implements driver.Prefetcher: Subscription.Run calls it
// with RunOptions.MaxOutstanding, the most deliveries it holds, and a
// prefetch asks for that many (at most max_ack_pending) instead of the
// size of the last receive. Without prefetching (NoPrefetch, or
// max_ack_pending 1) it does nothing.
func (s *subscription) SetPrefetch(n int) error {
	if s.prefetch && n >= 1 {
		s.runMax.Store(int64(n))
	}
	return nil
}

// ackID is one delivery: its driver.Message (whose ID, Key and Attempt
// it reads), and what settling it needs, in one allocation.
type ackID struct {
	msg jetstream.Msg
	seq uint64
	// settled is set (CompareAndSwap) by the settle that sends an ack, a
	// nack or a term, so that no second one starts, and cleared when it
	// fails; a lock extension reads it. Atomics, not a mutex: an ack is
	// on the hot path.
	settled atomic.Bool
	// deadline is when the server redelivers it at the earliest, in
	// nanoseconds of the subscription's monotonic clock (s.clock).
	deadline atomic.Int64
	dm       driver.Message
}

// ReceiveBatch asks the consumer for what it has now (a pull request
// that does not wait); when it has nothing, it waits up to WaitTime for
// one message (a pull request of one, which ends as soon as it is
// answered, so that no request is left open to take messages that no one
// will see). A message delivered for the (MaxDeliver)th time, on a
// subscription with a dead-letter stream, is dead-lettered unseen.
func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	for {
		// The server leaves a request that does not wait unanswered
		// (until the client's own timeout) while the consumer has
		// max_ack_pending deliveries in flight: it asks for no more than
		// that, and with max_ack_pending 1 only waits.
		if s.maxAckPending > 0 {
			maxMessages = min(maxMessages, s.maxAckPending)
		}
		r := receipt{s: s, ctx: ctx, max: maxMessages}
		if s.prefetch {
			s.lastMax.Store(int64(maxMessages))
			if p := s.takePrefetch(); p != nil {
				if err := r.fromPrefetch(p); err != nil {
					return nil, err
				}
			}
		}
		if r.seen == 0 && s.maxAckPending != 1 {
			if err := s.fetch(ctx, maxMessages, false, &r); err != nil {
				return nil, err
			}
		}
		if r.seen == 0 {
			if err := s.fetch(ctx, 1, true, &r); err != nil || r.seen == 0 {
				return nil, err
			}
			if maxMessages > 1 {
				// Its own failure is not this receive's: the one
				// message stands.
				_ = s.fetch(ctx, maxMessages-1, false, &r)
				if r.err != nil {
					return nil, r.err
				}
			}
		}
		if s.prefetch && r.seen == maxMessages {
			// A full batch: the consumer has more, likely; they come
			// while these are handled.
			s.startPrefetch()
		}
		if len(r.out) > 0 || ctx.Err() != nil {
			return r.out, nil
		}
	}
}

// receipt is what one ReceiveBatch decoded so far.
type receipt struct {
	s     *subscription
	ctx   context.Context
	max   int       // the most messages it takes
	start time.Time // before the pull request of the messages it decodes
	seen  int       // messages taken (decoded or dead-lettered)
	out   []*driver.Message
	slab  []ackID        // where the next messages are decoded
	hslab driver.Headers // where their headers are appended
	rest  []jetstream.Msg
	err   error // decode's
	// buf is where collect puts a pull's messages, before they are
	// decoded (or kept in rest, copied).
	buf [receiptBuf]jetstream.Msg
}

// receiptBuf is how many messages of a pull a receipt holds without
// allocating.
const receiptBuf = 128

// add decodes m, or keeps it for the next receive when r has its max;
// false (r.err set) stops the batch.
func (r *receipt) add(m jetstream.Msg) bool {
	if r.seen >= r.max {
		r.rest = append(r.rest, m)
		return true
	}
	r.seen++
	if r.out == nil {
		r.out = make([]*driver.Message, 0, min(r.max, 256))
	}
	if len(r.slab) == 0 {
		// Deliveries are allocated in slabs, not one by one.
		r.slab = make([]ackID, min(slabLen, r.max-r.seen+1))
	}
	dm, err := r.s.decode(r.ctx, m, r.start, &r.slab[0], &r.hslab, r.max-r.seen+1)
	r.slab = r.slab[1:]
	if err != nil {
		r.err = err
		return false
	}
	if dm != nil {
		r.out = append(r.out, dm)
	}
	return true
}

// slabLen is the most deliveries a receive allocates at once.
const slabLen = 32

// hslabLen is the most headers (name and value pairs) a receive allocates
// at once, unless a message has more.
const hslabLen = 128

// fromPrefetch takes p's messages, and puts back those beyond r.max
// (putBack: no other prefetch starts meanwhile, which the put back would
// orphan). A
// prefetch whose AckWait passed before this receive is dropped: the
// server delivers its messages again, and no settle of these would count.
// Only decode fails it: a failed pull is not this receive's, which pulls
// as it would have without one.
func (r *receipt) fromPrefetch(p *prefetched) error {
	r.start = p.start
	expired := !time.Now().Before(p.start.Add(r.s.ackWait))
	each := r.add
	if expired {
		each = func(jetstream.Msg) bool { return true }
	}
	msgs := p.msgs
	if p.b != nil {
		more, _ := r.s.collect(r.ctx, p.b, r.buf[:0])
		if len(msgs) == 0 {
			msgs = more
		} else {
			msgs = append(msgs, more...)
		}
	}
	for _, m := range msgs {
		if !each(m) {
			r.s.putBack(nil)
			return r.err
		}
	}
	var left *prefetched
	if len(r.rest) > 0 {
		p.msgs, p.b, r.rest = r.rest, nil, nil
		left = p
	}
	r.s.putBack(left)
	return nil
}

// fetch sends one pull request for up to n messages, waiting (up to
// WaitTime, within ctx) or not, and decodes them into r.
func (s *subscription) fetch(ctx context.Context, n int, wait bool, r *receipt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.start = time.Now()
	var b jetstream.MessageBatch
	var err error
	if wait {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < minWait {
			// A request that expires within a few milliseconds may reach
			// the server after the client gave up on it, and take a
			// message no one reads (it comes back after AckWait): wait
			// out the deadline instead.
			<-ctx.Done()
			return nil
		}
		fctx, cancel := context.WithTimeout(ctx, s.wait)
		defer cancel()
		b, err = s.cons.Fetch(n, jetstream.FetchContext(fctx))
	} else {
		b, err = s.cons.FetchNoWait(n)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, jetstream.ErrInvalidOption) {
			// The deadline passed between the check above and the
			// request (FetchContext refuses a deadline in the past).
			return nil
		}
		return err
	}
	msgs, err := s.collect(ctx, b, r.buf[:0])
	for _, m := range msgs {
		if !r.add(m) {
			return r.err
		}
	}
	return err
}

// collect reads a pull request's messages, appended to out (the
// receipt's buffer: no slice is allocated for a batch that fits it), then
// returns them: decoded one by one as they arrive, the receiving
// goroutine waits (and is woken) for each, which cost more CPU a message
// in the benchmark. It fails when the request brought none, and not
// because the consumer had none.
func (s *subscription) collect(ctx context.Context, b jetstream.MessageBatch, out []jetstream.Msg) ([]jetstream.Msg, error) {
	for m := range b.Messages() {
		out = append(out, m)
	}
	if err := b.Error(); err != nil && len(out) == 0 {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, natsgo.ErrTimeout), errors.Is(err, jetstream.ErrNoMessages):
			return nil, nil
		case strings.Contains(err.Error(), "Exceeded MaxAckPending"):
			// 409 to a request that does not wait: the consumer's
			// max_ack_pending deliveries are in flight; a waiting request
			// is answered once one is settled.
			return nil, nil
		}
		return nil, err
	}
	return out, nil
}

// stripped are the headers decode drops from a message that is not a
// dead letter (the dead-letter copy's own), besides nats-*.
var stripped = [...]string{HeaderID, HeaderKey, HeaderConsumer, HeaderSeq, driver.HeaderDeadLetterReason}

// isStripped reports whether k is one of stripped (all start "wary-").
func isStripped(k string) bool {
	if !strings.HasPrefix(k, "wary-") {
		return false
	}
	for _, sk := range stripped {
		if k == sk {
			return true
		}
	}
	return false
}

// decode maps a JetStream message to the driver's, in into, its headers
// appended to *hslab (a new one, sized for this message and up to left-1
// more like it, when it has no room), or dead-letters it (nil) when it is
// over the delivery limit.
func (s *subscription) decode(ctx context.Context, m jetstream.Msg, start time.Time, a *ackID, hslab *driver.Headers, left int) (*driver.Message, error) {
	md, ok := parseAckSubject(m.Reply())
	if !ok {
		// Not the form parseAckSubject reads: nats.go's own parser
		// decides (and says why it refuses).
		meta, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		md = ackMeta{streamSeq: meta.Sequence.Stream, delivered: meta.NumDelivered, timestamp: meta.Timestamp.UnixNano()}
	}
	a.msg, a.seq = m, md.streamSeq
	a.deadline.Store(s.clock(start) + int64(s.ackWait))
	dm := &a.dm
	dm.Attempt = int(md.delivered)
	h := m.Headers()
	dm.ID = h.Get(natsgo.MsgIdHdr)
	if dm.ID == "" {
		dm.ID = s.stream + ":" + strconv.FormatUint(a.seq, 10)
	}
	subj := m.Subject()
	if len(subj) > len(s.subject)+1 && subj[len(s.subject)] == '.' && subj[:len(s.subject)] == s.subject {
		dm.Key = subj[len(s.subject)+1:]
	}
	// The batch's messages share one backing array of headers: a
	// message's are a slice of it whose capacity ends with them, so that
	// an append to them (Headers.Set) copies instead of writing over the
	// next message's.
	if cap(*hslab)-len(*hslab) < len(h) {
		*hslab = make(driver.Headers, 0, max(len(h), min(hslabLen, len(h)*left)))
	}
	from := len(*hslab)
	for k, v := range h {
		if len(v) == 0 || len(k) >= 5 && strings.EqualFold(k[:5], "nats-") || !s.deadLetters && isStripped(k) {
			continue
		}
		*hslab = append(*hslab, [2]string{k, v[0]})
	}
	var headers driver.Headers
	if to := len(*hslab); to > from {
		headers = (*hslab)[from:to:to]
	}
	// headers stays nil on a message without any (as the other drivers
	// leave it), which reads as empty.
	if s.deadLetters {
		if id := headers.Get(HeaderID); id != "" {
			dm.ID = id
		}
		dm.Key = headers.Get(HeaderKey)
		headers.Del(HeaderID)
		headers.Del(HeaderKey)
		headers.Del(HeaderConsumer)
		headers.Del(HeaderSeq)
	}
	if s.dlq != nil && s.maxDeliver >= 2 && dm.Attempt >= s.maxDeliver {
		reason := fmt.Sprintf("delivery limit: delivered %d times (consumer %s's max_deliver %d), the lock expired on the last", dm.Attempt-1, s.consumer, s.maxDeliver)
		if err := s.deadLetter(ctx, a, reason); err != nil {
			return nil, err
		}
		return nil, nil
	}
	body := m.Data()
	if body == nil {
		body = []byte{}
	}
	dm.Headers, dm.Body, dm.AckID, dm.As = headers, body, a, a
	dm.Redelivered, dm.PublishTime = dm.Attempt > 1, time.Unix(0, md.timestamp)
	return dm, nil
}

// As is a received message's driver.Message.As: *jetstream.Msg and
// *Subject.
func (a *ackID) As(i any) bool {
	switch p := i.(type) {
	case *jetstream.Msg:
		*p = a.msg
	case *Subject:
		*p = Subject(a.msg.Subject())
	default:
		return false
	}
	return true
}

// ackMeta is what decode reads from a delivery's reply subject.
type ackMeta struct {
	streamSeq, delivered uint64
	timestamp            int64 // ns since the epoch
}

// parseAckSubject reads a JetStream ack subject without allocating:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>
// (9 tokens), or with <domain>.<account hash> after $JS.ACK (12 tokens, 11
// and more accepted, as nats.go's parser does). ok is false for anything
// else, and for a number that does not parse: nats.go's Metadata then
// decides.
func parseAckSubject(subj string) (md ackMeta, ok bool) {
	const prefix = "$JS.ACK."
	if len(subj) <= len(prefix) || subj[:len(prefix)] != prefix {
		return md, false
	}
	// dot holds the positions of the first dots after the prefix: one
	// pass, no token strings (this runs once a message).
	var dot [9]int
	nd := 0
	for i := len(prefix); i < len(subj) && nd < len(dot); i++ {
		if subj[i] == '.' {
			dot[nd], nd = i, nd+1
		}
	}
	// The tokens after the prefix: v1 has 7 (6 dots); v2 has 9 (8 dots,
	// the scan reached the end) or more (it stopped at 9 dots).
	var delivered, sseq, ts int
	switch {
	case nd == 6:
		delivered, sseq, ts = 2, 3, 5
	case nd >= 8:
		delivered, sseq, ts = 4, 5, 7
	default:
		return md, false
	}
	// Token k (from 0, after the prefix) ends at dot[k]: every token
	// read has a dot after it.
	var ok1, ok2, ok3 bool
	md.delivered, ok1 = parseNum(subj[dot[delivered-1]+1 : dot[delivered]])
	md.streamSeq, ok2 = parseNum(subj[dot[sseq-1]+1 : dot[sseq]])
	var t uint64
	t, ok3 = parseNum(subj[dot[ts-1]+1 : dot[ts]])
	md.timestamp = int64(t)
	return md, ok1 && ok2 && ok3
}

// parseNum parses a decimal of up to 19 digits.
func parseNum(d string) (uint64, bool) {
	if d == "" || len(d) > 19 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// settle kinds.
var (
	bodyAck  = []byte("+ACK")
	bodyTerm = []byte("+TERM")
	bodyWPI  = []byte("+WPI")
)

// settle publishes body to each delivery's reply subject, then flushes
// the connection once (a PING the server answers after reading
// everything before it), so that it returns once the server has every
// one; it marks them settled (unless progress). A delivery settled
// already, or whose AckWait has passed, fails with LockLost without a
// publish: the server redelivers it, or did.
func (s *subscription) settle(ctx context.Context, ids []driver.AckID, body func(*ackID) []byte, progress bool) error {
	return s.settleThen(ctx, ids, body, progress, false)
}

// settleThen is settle, sending a prefetch pull first when pull says so
// (SendAcks on a subscription that prefetches).
func (s *subscription) settleThen(ctx context.Context, ids []driver.AckID, body func(*ackID) []byte, progress, pull bool) error {
	if pull {
		// The next pull goes before the acks, so that the server
		// answers it without reading them first.
		s.startPrefetch()
	}
	// errs is allocated at the first failure: a delivery whose entry is
	// nil was published.
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(ids))
		}
		errs[i] = err
	}
	start := time.Now()
	now := s.clock(start)
	anySent := false
	for i, id := range ids {
		a, ok := id.(*ackID)
		if !ok {
			fail(i, invalidErr(fmt.Errorf("foreign AckID %T", id)))
			continue
		}
		// No second settle starts while this one runs: the mark is
		// taken before the publish, and given back if it fails.
		if now > a.deadline.Load() || progress && a.settled.Load() || !progress && !a.settled.CompareAndSwap(false, true) {
			fail(i, errLockLost)
			continue
		}
		if err := s.nc.Publish(a.msg.Reply(), body(a)); err != nil {
			fail(i, err)
			s.unsettle(a, progress)
			continue
		}
		anySent = true
	}
	if anySent {
		err := s.flush(ctx)
		if err != nil || progress {
			for i, id := range ids {
				if errs != nil && errs[i] != nil {
					continue // not sent
				}
				a := id.(*ackID)
				if err != nil {
					fail(i, err)
					s.unsettle(a, progress)
				} else {
					a.deadline.Store(now + int64(s.ackWait))
				}
			}
		}
	}
	if errs == nil {
		return nil
	}
	return driver.BatchErrors(errs)
}

// unsettle undoes settle's mark after a failure: the delivery may be
// settled again.
func (s *subscription) unsettle(a *ackID, progress bool) {
	if !progress {
		a.settled.Store(false)
	}
}

// flush waits until the server has read everything published before it,
// within ctx. A broker.Subscription always settles within a deadline (its
// SettleTimeout); a ctx without one gets the connection's own request
// timeout (natsgo.Options.Timeout), since nats.go's flush needs a deadline.
func (s *subscription) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.nc.Opts.Timeout)
		defer cancel()
	}
	return s.nc.FlushWithContext(ctx)
}

// SendAcks acknowledges each delivery (+ACK), and returns once the
// server has read them all (one flush for the call).
func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	return s.settleThen(ctx, ids, func(*ackID) []byte { return bodyAck }, false, s.prefetch)
}

// SendNacks returns the deliveries for redelivery after delay (-NAK with
// a delay). A delivery on its last attempt under the delivery limit is
// dead-lettered instead.
func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	if limit := s.caps.DeliveryLimit; limit > 0 && s.dlq != nil {
		var last, rest []driver.AckID
		var lastAt, restAt []int
		for i, id := range ids {
			if a, ok := id.(*ackID); ok && a.dm.Attempt >= limit {
				last, lastAt = append(last, id), append(lastAt, i)
			} else {
				rest, restAt = append(rest, id), append(restAt, i)
			}
		}
		if len(last) > 0 {
			errs := make([]error, len(ids))
			spread := func(err error, at []int) {
				var be *driver.BatchError
				for j, i := range at {
					if errors.As(err, &be) {
						errs[i] = be.Errs[j]
					} else {
						errs[i] = err
					}
				}
			}
			spread(s.SendDeadLetters(ctx, last, fmt.Sprintf("delivery limit: nacked on delivery %d of %d (consumer %s)", limit, limit, s.consumer)), lastAt)
			if len(rest) > 0 {
				spread(s.nack(ctx, rest, delay), restAt)
			}
			return driver.BatchErrors(errs)
		}
	}
	return s.nack(ctx, ids, delay)
}

func (s *subscription) nack(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	body := []byte("-NAK")
	if delay > 0 {
		body = fmt.Appendf(nil, `-NAK {"delay": %d}`, delay.Nanoseconds())
	}
	return s.settle(ctx, ids, func(*ackID) []byte { return body }, false)
}

// ExtendLocks resets each delivery's AckWait (+WPI). JetStream extends by
// AckWait from now, whatever d: for d longer than AckWait the driver
// repeats +WPI every third of AckWait until d has passed or the delivery
// is settled.
func (s *subscription) ExtendLocks(ctx context.Context, ids []driver.AckID, d time.Duration) error {
	if err := s.settle(ctx, ids, func(*ackID) []byte { return bodyWPI }, true); err != nil {
		return err
	}
	if d <= s.ackWait {
		return nil
	}
	until := time.Now().Add(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.holds[id.(*ackID)] = until
	}
	if !s.holding && s.bg.Err() == nil {
		s.holding = true
		s.wg.Add(1)
		go s.hold()
	}
	return nil
}

// hold renews the locks of s.holds until they end.
func (s *subscription) hold() {
	defer s.wg.Done()
	t := time.NewTicker(max(s.ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var renew []driver.AckID
		s.mu.Lock()
		for a, until := range s.holds {
			if a.settled.Load() || !now.Before(until) {
				delete(s.holds, a)
				continue
			}
			renew = append(renew, a)
		}
		if len(s.holds) == 0 {
			s.holding = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.bg, max(s.ackWait/3, 10*time.Millisecond))
		_ = s.settle(ctx, renew, func(*ackID) []byte { return bodyWPI }, true) // a failed renewal shows as LockLost at settle
		cancel()
	}
}

// SendDeadLetters publishes a copy of each message to the dead-letter
// stream (awaiting its PubAck), then terminates the delivery (+TERM). A
// failure between the two leaves the message in both streams, never in
// neither: the original comes back after AckWait, and its copy's
// Nats-Msg-Id (consumer, stream and sequence) makes a second copy a
// duplicate the dead-letter stream drops inside its duplicate_window.
func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	if s.dlq == nil {
		return invalidErr(fmt.Errorf("stream %s has no dead-letter stream (create %s capturing %s)", s.stream, DeadLetterStream(s.stream), DeadLetterSubject(s.stream, "*")))
	}
	errs := make([]error, len(ids))
	for i, id := range ids {
		a, ok := id.(*ackID)
		if !ok {
			errs[i] = invalidErr(fmt.Errorf("foreign AckID %T", id))
			continue
		}
		errs[i] = s.deadLetter(ctx, a, reason)
	}
	return driver.BatchErrors(errs)
}

func (s *subscription) deadLetter(ctx context.Context, a *ackID, reason string) error {
	if a.settled.Load() || s.clock(time.Now()) > a.deadline.Load() {
		return errLockLost
	}
	reason = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, reason)
	if len(reason) > MaxReasonLen {
		reason = strings.ToValidUTF8(reason[:MaxReasonLen], "")
	}
	h := natsgo.Header{}
	for k, v := range a.msg.Headers() {
		if len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
			continue
		}
		h[k] = v
	}
	h[HeaderID] = []string{a.dm.ID}
	if a.dm.Key != "" {
		h[HeaderKey] = []string{a.dm.Key}
	}
	h[HeaderConsumer] = []string{s.consumer}
	h[HeaderSeq] = []string{strconv.FormatUint(a.seq, 10)}
	if r := strings.TrimSpace(reason); r != "" {
		h[driver.HeaderDeadLetterReason] = []string{r}
	}
	h[natsgo.MsgIdHdr] = []string{s.stream + "." + s.consumer + "." + strconv.FormatUint(a.seq, 10)}
	m := &natsgo.Msg{Subject: s.dlq.subject, Header: h, Data: a.msg.Data()}
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(s.dlq.stream), jetstream.WithRetryAttempts(0)); err != nil {
		return err
	}
	if hook, _ := ctx.Value(termHookKey{}).(func(context.Context) error); hook != nil {
		if err := hook(ctx); err != nil {
			return err
		}
	}
	return s.settle(ctx, []driver.AckID{a}, func(*ackID) []byte { return bodyTerm }, false)
}

// termHookKey is the context key of a test's failpoint: the function it
// holds runs between the copy and the +TERM (export_test.go sets it).
type termHookKey struct{}

func (s *subscription) Capabilities() capability.Subscription { return s.caps }
func (s *subscription) Classify(err error) driver.ErrorInfo   { return classify(err) }
func (s *subscription) ErrorAs(err error, i any) bool         { return errorAs(err, i) }

// As accepts *jetstream.JetStream, **natsgo.Conn, *jetstream.Consumer and
// *Subject.
func (s *subscription) As(i any) bool {
	switch p := i.(type) {
	case *jetstream.JetStream:
		*p = s.js
	case **natsgo.Conn:
		*p = s.nc
	case *jetstream.Consumer:
		*p = s.cons
	case *Subject:
		*p = Subject(s.subject)
	default:
		return false
	}
	return true
}

// Close stops renewing held locks, and returns prefetched messages no
// receive took (-NAK). With NoPrefetch no pull request outlives a
// receive, so no message waits in the client: unsettled deliveries come
// back after their AckWait.
func (s *subscription) Close() error {
	s.stopBG()
	s.wg.Wait()
	if p := s.takePrefetch(); p != nil {
		// Return what no receive took, at once (a batch ends within a
		// second, nats.go's expiry of a pull that does not wait).
		for _, m := range p.msgs {
			_ = m.Nak() // else it comes back after AckWait
		}
		if p.b != nil {
			for m := range p.b.Messages() {
				_ = m.Nak()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.nc.Opts.Timeout)
		_ = s.nc.FlushWithContext(ctx)
		cancel()
	}
	if s.own != nil {
		s.own.Close()
	}
	return nil
}

// Describe names the stream for telemetry (driver.Describer).
func (s *subscription) Describe() (system, destination string) { return "nats", s.stream }
