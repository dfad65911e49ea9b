package kafka

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// SubscriptionOptions configures a subscription. Nil means defaults; every
// default is given below.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (logger).
	broker.SubscriptionOptions

	// Ordered keeps each partition's order while processing: the next
	// record of a partition is not handed out before the previous one is
	// settled (capability.Subscription.HeadOfLine). Partitions still run concurrently.
	// Default false: records of a partition are handed out without waiting,
	// and may be processed concurrently.
	Ordered bool

	// DeadLetterTopic is the topic that Delivery.DeadLetter and the
	// delivery limit write to, with the reason in the header
	// driver.HeaderDeadLetterReason. It must exist. Default "": no
	// dead-lettering (capability.Subscription.DeadLetter is false).
	DeadLetterTopic string

	// DeliveryLimit dead-letters a message, instead of delivering it again,
	// once it was nacked on its DeliveryLimit-th delivery. The library
	// counts (capability.Subscription.DeliveryLimitMode is LimitEmulated); see the
	// package doc for what the count survives. Needs DeadLetterTopic.
	// Default 0: no limit.
	DeliveryLimit int

	// RetryTopic, if set, is where Nack writes a copy of the message (with
	// its next delivery number and the time it is due in headers) before
	// committing past the original; the subscription consumes RetryTopic
	// too. Without it, Nack keeps the record in the consumer and hands it
	// out again after the delay, and the partition's committed offset stays
	// before it (the equivalent of pausing and seeking back, without the
	// refetch). It must exist, and cannot be combined with Ordered (a copy
	// would overtake the records behind it). Default "".
	RetryTopic string

	// CommitInterval, if positive, makes Ack return once the ack is
	// recorded, and commits the acked prefix of every partition in the
	// background every CommitInterval, on revoke and on Close. A crash
	// then redelivers up to one interval of acked records. Default 0: Ack
	// returns after the broker confirmed the offset commit that covers it
	// (concurrent acks share one commit).
	CommitInterval time.Duration

	// MaxNackDelay is the longest delay Nack accepts; a longer one is
	// ErrInvalid, and the delivery stays unsettled. A nacked record is held
	// by the consumer until it is due, and a record of RetryTopic whose
	// due-time header is later than MaxNackDelay from now (which only a
	// producer other than the driver can write) is due at that bound.
	// Default DefaultMaxNackDelay.
	MaxNackDelay time.Duration

	// MaxBufferedPerPartition is how many fetched records the subscription
	// holds per partition before it pauses fetching that partition.
	// Default 500.
	MaxBufferedPerPartition int

	// RevokeTimeout is how long a revoke (a rebalance taking partitions
	// away) waits for the deliveries in flight on those partitions to be
	// settled before committing and giving them up; deliveries settled
	// later fail with broker.ErrLockLost. It must stay well under the
	// group's rebalance timeout. Default 10s.
	RevokeTimeout time.Duration

	// SkipCheck skips the look-up, at open, of the topics (the topic,
	// RetryTopic and DeadLetterTopic). They are then not checked for
	// existence, MaxMessageSize is the client's ProducerBatchMaxBytes less
	// the driver's overhead, and RedeliveryHorizon is HorizonUnknown.
	SkipCheck bool
}

// DefaultMaxNackDelay is SubscriptionOptions.MaxNackDelay's default.
const DefaultMaxNackDelay = 24 * time.Hour

// The consumer-group defaults SubscriptionOpts and TransactOpts start
// with (the program's options after them win). kgo's own default session
// timeout is 45s: a member that dies without leaving the group (a crash, a
// kill, a lost network) keeps its partitions idle that long. A
// subscription's effects belong in an inbox (package idem), which absorbs
// the duplicates that a spurious expiry (a pause longer than the session)
// causes, so a faster failover is worth more: the driver sets 10s, with a
// heartbeat every second. The broker must allow it
// (group.min.session.timeout.ms, default 6s).
const (
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
)

// groupDefaults are the kgo options every group client of the driver starts
// with.
func groupDefaults() []kgo.Opt {
	return []kgo.Opt{
		kgo.SessionTimeout(DefaultSessionTimeout),
		kgo.HeartbeatInterval(DefaultHeartbeatInterval),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
}

// OpenSubscription joins the consumer group named group (the subscription)
// on topic, through cl: the program's client, built with
// SubscriptionOpts(group) followed by the program's options (seed
// brokers, TLS, SASL, and any other kgo option):
//
//	cl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing"), kgo.SeedBrokers(seeds...))...)
//	sub, err := kafka.OpenSubscription(ctx, cl, "orders", "billing", nil)
//
// A client built otherwise, for another group, or serving a subscription
// already, is an error matching broker.ErrInvalid that carries a
// *ClientError. The subscription adds its topic (and RetryTopic) to the
// client's consumed topics, which starts the group's consumption. Close
// leaves the group (committing the acked prefix of every partition on the
// way out) and leaves cl open: the program closes it after the
// subscription. As(**kgo.Client) reaches cl.
//
// It returns an error matching broker.ErrNotFound when a topic does not
// exist, and broker.ErrInvalid for inconsistent options. ctx bounds the
// look-up of the topics at open (the driver sets no timeout of its own),
// not the group's consumption, which lasts until Close.
func OpenSubscription(ctx context.Context, cl *kgo.Client, topic, group string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	s, err := newSubscription(ctx, cl, topic, group, opts, false)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &s.opts.SubscriptionOptions), nil
}

// OpenDeadLetters reads topic, a dead-letter topic this driver writes
// (the DeadLetterTopic of one or more subscriptions), as the consumer
// group named group, through cl: the program's client, built with
// SubscriptionOpts(group) as for OpenSubscription:
//
//	cl, err := kgo.NewClient(append(kafka.SubscriptionOpts("billing"+kafka.DeadLetterGroupSuffix), kgo.SeedBrokers(seeds...))...)
//	dl, err := kafka.OpenDeadLetters(ctx, cl, "orders-dlq", "billing"+kafka.DeadLetterGroupSuffix, nil)
//
// It is a subscription as OpenSubscription opens one, with the same
// options, checks and errors, except that each dead letter reports its
// reason and origin in the headers driver.HeaderDeadLetterReason and
// HeaderDeadLetterSource. A subscription opened with OpenSubscription
// drops those headers on receipt, as every reserved header the driver
// does not read, since any producer could write them. Acks commit the
// group's offsets, cumulatively as on any Kafka subscription. Every
// subscription dead-lettering to topic writes to the same topic, so the
// reader sees the dead letters of each (HeaderDeadLetterSource tells
// where a record came from). Close leaves cl open.
func OpenDeadLetters(ctx context.Context, cl *kgo.Client, topic, group string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	s, err := newSubscription(ctx, cl, topic, group, opts, true)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, &s.opts.SubscriptionOptions), nil
}

type tp struct {
	topic string
	part  int32
}

type subscription struct {
	cl    *kgo.Client
	auth  *authWatch
	topic string
	group string
	opts  SubscriptionOptions
	// deadLetters: topic is a dead-letter topic (OpenDeadLetters), whose
	// records keep their reason and source headers.
	deadLetters bool
	caps        capability.Subscription
	logger      *slog.Logger

	pollCtx    context.Context
	pollCancel context.CancelFunc
	pollDone   chan struct{}
	bgDone     chan struct{}

	pauseMu sync.Mutex // orders pause and resume calls into kgo

	mu         sync.Mutex
	parts      map[tp]*partition
	order      []*partition // assigned partitions, for round-robin hand-out
	rr         int
	wake       chan struct{} // closed and replaced when something changes
	closing    bool
	closingCh  chan struct{}
	fetchErr   error
	pauseDirty bool
	markSeq    uint64 // bumped by every settle that may move a commit
	commitSeq  uint64 // markSeq covered by the last successful commit
	closeErr   error

	commitMu chan struct{} // one commit at a time; acks queue behind it

	owned bool // cl was built by the URL opener, and is closed with the subscription
}

func newSubscription(ctx context.Context, cl *kgo.Client, topic, group string, opts *SubscriptionOptions, deadLetters bool) (*subscription, error) {
	fn := "OpenSubscription"
	if deadLetters {
		fn = "OpenDeadLetters"
	}
	if group == "" {
		return nil, driver.Invalidf("kafka: %s needs a group", fn)
	}
	if err := checkTopicName("topic", topic); err != nil {
		return nil, err
	}
	s := &subscription{topic: topic, group: group, deadLetters: deadLetters, parts: map[tp]*partition{}, wake: make(chan struct{}),
		closingCh: make(chan struct{}), commitMu: make(chan struct{}, 1), pollDone: make(chan struct{}), bgDone: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if err := checkTopicNames(o); err != nil {
		return nil, err
	}
	switch {
	case o.DeliveryLimit < 0:
		return nil, driver.Invalidf("kafka: DeliveryLimit must not be negative")
	case o.DeliveryLimit > 0 && o.DeadLetterTopic == "":
		return nil, driver.Invalidf("kafka: DeliveryLimit needs a DeadLetterTopic")
	case o.RetryTopic != "" && o.Ordered:
		return nil, driver.Invalidf("kafka: RetryTopic cannot be combined with Ordered: a retried copy would overtake the records behind it")
	case o.RetryTopic == topic || o.DeadLetterTopic == topic || (o.RetryTopic != "" && o.RetryTopic == o.DeadLetterTopic):
		return nil, driver.Invalidf("kafka: the topic, RetryTopic and DeadLetterTopic must differ")
	}
	if o.MaxBufferedPerPartition <= 0 {
		o.MaxBufferedPerPartition = 500
	}
	if o.MaxNackDelay <= 0 {
		o.MaxNackDelay = DefaultMaxNackDelay
	}
	if o.RevokeTimeout <= 0 {
		o.RevokeTimeout = 10 * time.Second
	}
	s.logger = o.Telemetry.Logger
	if s.logger == nil {
		s.logger = slog.Default()
	}
	topics := []string{topic}
	if o.RetryTopic != "" {
		topics = append(topics, o.RetryTopic)
	}
	if err := bindGroup(cl, fn, "SubscriptionOpts", group, func(h *hooks) { h.sub = s }); err != nil {
		return nil, err
	}
	h := hooksOf(cl)
	lim, auth := &h.lim, &h.authWatch
	if err := checkProducer(cl); err != nil && o.DeadLetterTopic+o.RetryTopic != "" {
		h.unbind()
		return nil, err
	}
	horizon, src := capability.HorizonUnknown, skippedSubSource(topic, o)
	if !o.SkipCheck {
		hz, path, err := describePath(ctx, cl, lim, topic, o.RetryTopic)
		if err == nil && o.DeadLetterTopic != "" {
			_, err = describeTopic(ctx, cl, lim, o.DeadLetterTopic)
		}
		if err != nil {
			h.unbind()
			return nil, openFailure(err, auth)
		}
		horizon, src = hz, subSource(o, path, hz)
	}
	s.cl, s.auth = cl, auth
	s.caps = subCaps(o, horizon)
	s.caps.Source = src
	cl.AddConsumeTopics(topics...)
	s.pollCtx, s.pollCancel = context.WithCancel(context.Background())
	go s.pollLoop()
	go s.background()
	return s, nil
}

func (s *subscription) signalLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// pollLoop moves fetched records into the partitions' queues. With
// BlockRebalanceOnPoll, no rebalance callback runs between a poll and
// AllowRebalance, so records are never filed under a partition that was
// revoked meanwhile.
func (s *subscription) pollLoop() {
	defer close(s.pollDone)
	for {
		fs := s.cl.PollRecords(s.pollCtx, 0)
		if fs.IsClientClosed() || s.pollCtx.Err() != nil {
			s.cl.AllowRebalance()
			return
		}
		s.mu.Lock()
		fs.EachError(func(t string, p int32, err error) {
			if ke, ok := err.(*kerr.Error); ok && ke.Retriable {
				return
			}
			if dl := (*kgo.ErrDataLoss)(nil); errors.As(err, &dl) {
				// kgo has moved the partition's position already (back,
				// usually); the records from there follow, and the
				// partition rewinds to the first of them (see rewind).
				s.logger.Warn("wary/kafka: the broker reports records lost; the partition is read again from the offset it reset to",
					slog.String("topic", t), slog.Int("partition", int(p)), slog.Int64("consumed_to", dl.ConsumedTo), slog.Int64("reset_to", dl.ResetTo))
				return
			}
			s.logger.Warn("wary/kafka: fetch failed", slog.String("topic", t), slog.Int("partition", int(p)), slog.String("error", err.Error()))
			s.fetchErr = err
		})
		// Entries are allocated in slabs (see slabLen).
		left, now := fs.NumRecords(), time.Now()
		var slab []entry
		fs.EachRecord(func(r *kgo.Record) {
			left--
			p := s.parts[tp{r.Topic, r.Partition}]
			if p == nil || p.lost {
				return // cannot happen with BlockRebalanceOnPoll; never file it elsewhere
			}
			if r.Offset < p.next {
				if p.rewind(r.Offset) && p.paused {
					s.pauseDirty = true
				}
				s.markSeq++ // the committed offset must move back too
			}
			if len(slab) == 0 {
				slab = make([]entry, min(slabLen, left+1))
			}
			p.ingest(&slab[0], r, now)
			slab = slab[1:]
			if len(p.ready) >= s.opts.MaxBufferedPerPartition && !p.paused {
				s.pauseDirty = true
			}
		})
		s.signalLocked()
		s.mu.Unlock()
		s.cl.AllowRebalance()
		s.syncPauses()
	}
}

// syncPauses makes kgo's paused set match the partitions' wishes.
func (s *subscription) syncPauses() {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	s.mu.Lock()
	if !s.pauseDirty {
		s.mu.Unlock()
		return
	}
	s.pauseDirty = false
	var pause, resume map[string][]int32
	for _, p := range s.order {
		n := len(p.ready)
		switch {
		case !p.paused && n >= s.opts.MaxBufferedPerPartition:
			p.paused = true
			pause = addTP(pause, p.tp)
		case p.paused && n <= s.opts.MaxBufferedPerPartition/2:
			p.paused = false
			resume = addTP(resume, p.tp)
		}
	}
	s.mu.Unlock()
	if pause != nil {
		s.cl.PauseFetchPartitions(pause)
	}
	if resume != nil {
		s.cl.ResumeFetchPartitions(resume)
	}
}

func addTP(m map[string][]int32, t tp) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[t.topic] = append(m[t.topic], t.part)
	return m
}

// background commits every CommitInterval, when set.
func (s *subscription) background() {
	defer close(s.bgDone)
	if s.opts.CommitInterval <= 0 {
		return
	}
	t := time.NewTicker(s.opts.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closingCh:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.commit(ctx); err != nil {
				s.logger.Warn("wary/kafka: background commit failed", slog.String("group", s.group), slog.String("error", err.Error()))
			}
			cancel()
		}
	}
}

// receiveWait is how long ReceiveBatch waits for records before it returns
// an empty batch.
const receiveWait = 250 * time.Millisecond

func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	deadline := time.Now().Add(receiveWait)
	for {
		now := time.Now()
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return nil, errClosed
		}
		if err := s.fetchErr; err != nil {
			s.fetchErr = nil
			s.mu.Unlock()
			return nil, err
		}
		es, next := s.takeLocked(maxMessages, now)
		taken := snapshot(es)
		wake, dirty := s.wake, s.pauseDirty
		s.mu.Unlock()
		if dirty {
			s.syncPauses()
		}
		if len(taken) > 0 {
			return materialize(taken, s.deadLetters), nil
		}
		wait := deadline.Sub(now)
		if !next.IsZero() && next.Sub(now) < wait {
			wait = next.Sub(now)
		}
		if wait <= 0 && now.After(deadline) {
			return nil, nil
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// takeLocked hands out up to n records, round-robin over partitions. It
// returns the earliest time a held-back record becomes due, if any.
func (s *subscription) takeLocked(n int, now time.Time) (out []*entry, next time.Time) {
	np := len(s.order)
	for i := 0; i < np && len(out) < n; i++ {
		p := s.order[(s.rr+i)%np]
		if p.lost || p.revoking {
			continue
		}
		before := len(out)
		var due time.Time
		out, due = p.take(out, n, now, s.opts.Ordered)
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
		if p.paused && len(out) > before && len(p.ready) <= s.opts.MaxBufferedPerPartition/2 {
			s.pauseDirty = true
		}
	}
	if np > 0 {
		s.rr = (s.rr + 1) % np
	}
	return out, next
}

func (s *subscription) Capabilities() capability.Subscription { return s.caps }
func (s *subscription) Classify(err error) driver.ErrorInfo   { return classify(err) }

// As accepts **kgo.Client (the subscription's consumer-group client).
func (s *subscription) As(i any) bool {
	if p, ok := i.(**kgo.Client); ok {
		*p = s.cl
		return true
	}
	return false
}

func (s *subscription) ErrorAs(err error, i any) bool { return errorAs(err, i) }

// Close stops fetching and leaves the group, committing the acked prefix
// of every partition on the way out, in the final revoke; it closes the
// client only if the URL opener built it. Records not acked are
// redelivered to the group's next owner of their partition.
func (s *subscription) Close() error {
	s.mu.Lock()
	s.closing = true
	close(s.closingCh)
	s.signalLocked()
	s.mu.Unlock()
	s.pollCancel()
	<-s.pollDone
	<-s.bgDone
	if s.owned {
		s.cl.CloseAllowingRebalance()
	} else {
		s.cl.AllowRebalance()
		s.cl.LeaveGroup()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.order {
		p.lost = true
	}
	s.order, s.parts = nil, map[tp]*partition{}
	return s.closeErr
}
