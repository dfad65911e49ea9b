package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// TransactOptions configures a TransactSession. Nil means defaults; every
// default is given below.
type TransactOptions struct {
	// Logger receives aborted transactions and retries. Default:
	// slog.Default().
	Logger *slog.Logger

	// MaxBatch is the most records consumed in one transaction. Default
	// 500.
	MaxBatch int

	// Backoff gives the pause after an aborted transaction, by the number
	// of aborts in a row (default 100ms doubling to 30s).
	Backoff broker.Backoff

	// SkipCheck skips the check, at open, that the topic exists.
	SkipCheck bool
}

// TxHandler transforms one transaction's consumed messages. It publishes
// its output with tx.Publish. Returning nil commits the transaction: its
// output and its input's offsets become visible together. Returning an
// error (or a panic) aborts it: none of its output becomes visible to
// read_committed consumers, and its input is consumed again.
type TxHandler func(ctx context.Context, tx *Tx) error

// Tx is one transaction of a TransactSession: a batch of consumed records
// and the records published in it.
type Tx struct {
	// Messages are the consumed messages, in offset order within each
	// partition.
	Messages []*TxMessage

	ctx  context.Context
	sess *kgo.GroupTransactSession

	mu      sync.Mutex
	err     error // the first produce error
	pending sync.WaitGroup
	closed  bool
}

// TxMessage is one consumed message of a transaction.
type TxMessage struct {
	// Message is the message (ID, key, headers and body, as a
	// Subscription delivers them).
	Message *broker.Message
	// Attempt is how many times this session handed the record out
	// (1 the first time; aborted transactions redeliver). As for
	// subscriptions, the count lives in memory: a record that moves to
	// another member starts again at 1.
	Attempt int
	// Redelivered is Attempt > 1.
	Redelivered bool
	// Record is the record as kgo returned it. Do not modify it.
	Record *kgo.Record
}

// Publish adds msgs, for the Kafka topic named topic, to the transaction.
// It returns at once: the records are written in the background and
// become visible, to read_committed consumers, only if the transaction
// commits. A message without an ID gets a random one, as with
// Topic.Publish. Publish returns an error matching broker.ErrInvalid for a
// message that Topic.Publish would reject (an invalid ID, a header value
// not UTF-8, a reserved "wary-" header name) or an invalid topic name, and
// broker.ErrClosed once the handler has returned. A record that fails to be
// written aborts the transaction.
func (tx *Tx) Publish(topic string, msgs ...*broker.Message) error {
	if err := checkTopicName("Tx.Publish topic", topic); err != nil {
		return err
	}
	recs := make([]*kgo.Record, 0, len(msgs))
	for _, m := range msgs {
		if m == nil {
			return driver.Invalidf("kafka: Tx.Publish: nil message")
		}
		if m.ID != "" {
			if err := driver.ValidateID(m.ID); err != nil {
				return driver.Invalidf("kafka: Tx.Publish: %v", errors.Unwrap(err))
			}
		}
		if !utf8.ValidString(m.Key) {
			return driver.Invalidf("kafka: Tx.Publish: message %q: the key must be valid UTF-8", m.ID)
		}
		for k, v := range m.Headers.All() {
			if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
				return driver.Invalidf("kafka: Tx.Publish: message %q: header %q: names and values must be non-empty, valid UTF-8", m.ID, k)
			}
			if driver.ReservedHeader(k) {
				return driver.Invalidf("kafka: Tx.Publish: message %q: header %q is reserved (names starting with \"wary-\" are set by wary and its drivers)", m.ID, k)
			}
		}
		if m.ID == "" {
			m.ID = broker.NewID()
		}
		recs = append(recs, toRecord(topic, &driver.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}))
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.closed {
		return &codedError{code: driver.Closed, err: errors.New("kafka: Tx.Publish after the handler returned")}
	}
	for _, r := range recs {
		tx.pending.Add(1)
		tx.sess.Produce(tx.ctx, r, tx.produced)
	}
	return nil
}

func (tx *Tx) produced(_ *kgo.Record, err error) {
	if err != nil {
		tx.mu.Lock()
		if tx.err == nil {
			tx.err = err
		}
		tx.mu.Unlock()
	}
	tx.pending.Done()
}

// TransactSession is a consume-transform-produce loop inside Kafka with
// exactly-once effect on Kafka: each transaction commits the records its
// handler published and the consumed records' offsets atomically (kgo's
// GroupTransactSession). See the package doc, section Transactions, for
// what it covers and what it does not.
type TransactSession struct {
	sess   *kgo.GroupTransactSession
	group  string
	opts   TransactOptions
	logger *slog.Logger

	mu       sync.Mutex
	attempts map[tp]map[int64]int // hand-outs of records in aborted transactions
	running  bool

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

// OpenTransactSession joins the consumer group named group on topic,
// through sess: the program's transactional group client, built by
// kgo.NewGroupTransactSession with TransactOpts(group) followed by the
// program's options (seed brokers, TLS, SASL, a stable
// kgo.TransactionalID, and any other kgo option):
//
//	sess, err := kgo.NewGroupTransactSession(append(kafka.TransactOpts("enricher"),
//		kgo.SeedBrokers(seeds...), kgo.TransactionalID("enricher-1"))...)
//	s, err := kafka.OpenTransactSession(ctx, sess, "orders", "enricher", nil)
//
// The client is kgo's GroupTransactSession, not a bare *kgo.Client,
// because the session's exactly-once commit (a transaction aborted when
// the group rebalances during it) rests on callbacks kgo installs only
// when it builds the client. A session built otherwise, for another
// group, without read_committed fetches, or serving a session already, is
// an error matching broker.ErrInvalid that carries a *ClientError. The
// session adds topic to the consumed topics, which starts the group's
// consumption. Close leaves the group and leaves sess open: the program
// closes it. ctx bounds the look-up of the topic at open: the driver sets
// no timeout of its own.
func OpenTransactSession(ctx context.Context, sess *kgo.GroupTransactSession, topic, group string, opts *TransactOptions) (*TransactSession, error) {
	if group == "" {
		return nil, driver.Invalidf("kafka: OpenTransactSession needs a group")
	}
	if err := checkTopicName("topic", topic); err != nil {
		return nil, err
	}
	if sess == nil {
		return nil, clientError("OpenTransactSession", "no client")
	}
	s := &TransactSession{group: group, attempts: map[tp]map[int64]int{}, closed: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if o.MaxBatch <= 0 {
		o.MaxBatch = 500
	}
	s.logger = o.Logger
	if s.logger == nil {
		s.logger = slog.Default()
	}
	cl := sess.Client()
	if err := bindGroup(cl, "OpenTransactSession", "TransactOpts", group, func(h *hooks) { h.tx = s }); err != nil {
		return nil, err
	}
	h := hooksOf(cl)
	fail := func(err error) (*TransactSession, error) {
		h.unbind()
		return nil, err
	}
	if id, ok := cl.OptValue(kgo.TransactionalID).(string); !ok || id == "" {
		return fail(clientError("OpenTransactSession", "the client has no transactional ID (kgo.TransactionalID)"))
	}
	// kgo reports the level as its wire value: 1 is read_committed.
	if lvl, ok := cl.OptValue(kgo.FetchIsolationLevel).(int8); !ok || lvl != 1 {
		return fail(clientError("OpenTransactSession", "the client must fetch with kgo.FetchIsolationLevel(kgo.ReadCommitted()): an input record of an aborted transaction must never be consumed"))
	}
	if err := checkProducer(cl); err != nil {
		return fail(err)
	}
	if !o.SkipCheck {
		if _, err := describeTopic(ctx, cl, &h.lim, topic); err != nil {
			return fail(openFailure(err, &h.authWatch))
		}
	}
	s.sess = sess
	cl.AddConsumeTopics(topic)
	return s, nil
}

// forget drops the attempt counts of partitions leaving this member.
func (s *TransactSession) forget(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, parts := range m {
		for _, p := range parts {
			delete(s.attempts, tp{topic, p})
		}
	}
}

// As accepts **kgo.Client: the session's transactional client (for
// metrics or admin requests; do not use it to produce or to end
// transactions).
func (s *TransactSession) As(i any) bool {
	if p, ok := i.(**kgo.Client); ok {
		*p = s.sess.Client()
		return true
	}
	return false
}

// Run consumes up to MaxBatch records at a time, and for each batch begins
// a transaction, calls h, and ends the transaction: with a commit if h
// returned nil and every record it published was written, with an abort
// otherwise. kgo also aborts a transaction during which the group
// rebalanced. After an abort the batch is consumed again (after a pause
// from Backoff), so a handler that always fails on a record stops its
// partition; publish such a record to a dead-letter topic in the
// transaction instead of failing.
//
// Run returns nil when ctx is canceled, an error matching broker.ErrClosed
// when the session was closed, and otherwise the first error that ends the
// transactional producer (kgo's End errors are not retryable: close the
// session and open a new one). Only one Run may be active at a time.
func (s *TransactSession) Run(ctx context.Context, h TxHandler) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return driver.Invalidf("kafka: TransactSession.Run is already running")
	}
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	// Close ends a poll in progress.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-pctx.Done():
		}
	}()
	errClosedSession := &codedError{code: driver.Closed, err: errors.New("kafka: transact session is closed")}
	aborts := 0
	for {
		if isClosed(s.closed) {
			return errClosedSession
		}
		if ctx.Err() != nil {
			return nil
		}
		fs := s.sess.PollRecords(pctx, s.opts.MaxBatch)
		if fs.IsClientClosed() || isClosed(s.closed) {
			return errClosedSession
		}
		if ctx.Err() != nil {
			return nil
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			if ke, ok := err.(*kerr.Error); ok && ke.Retriable {
				return
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			s.logger.Warn("wary/kafka: fetch failed", slog.String("topic", t), slog.Int("partition", int(p)), slog.String("error", err.Error()))
			if fetchErr == nil {
				fetchErr = err
			}
		})
		recs := fs.Records()
		if len(recs) == 0 {
			if fetchErr != nil {
				return fetchErr
			}
			continue
		}
		committed, err := s.transact(ctx, recs, h)
		if err != nil {
			return err
		}
		if committed {
			aborts = 0
			continue
		}
		aborts++
		t := time.NewTimer(s.opts.Backoff.Delay(aborts))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// transact runs one transaction over recs.
func (s *TransactSession) transact(ctx context.Context, recs []*kgo.Record, h TxHandler) (bool, error) {
	if err := s.sess.Begin(); err != nil {
		return false, err
	}
	tx := &Tx{ctx: ctx, sess: s.sess, Messages: make([]*TxMessage, len(recs))}
	s.mu.Lock()
	for i, r := range recs {
		attempt := 1
		if m := s.attempts[tp{r.Topic, r.Partition}]; m != nil && m[r.Offset] > 0 {
			attempt = m[r.Offset]
		}
		tx.Messages[i] = &TxMessage{Attempt: attempt, Redelivered: attempt > 1, Record: r}
	}
	s.mu.Unlock()
	for i, dm := range materialize(snapshot(recordEntries(recs)), false) {
		tx.Messages[i].Message = &broker.Message{ID: dm.ID, Key: dm.Key, Headers: dm.Headers, Body: dm.Body}
	}

	herr := callTx(ctx, h, tx)
	tx.mu.Lock()
	tx.closed = true
	tx.mu.Unlock()
	// End flushes too, but only a flush here lets a failed record turn
	// the commit into an abort.
	tx.pending.Wait()
	tx.mu.Lock()
	perr := tx.err
	tx.mu.Unlock()
	commit := herr == nil && perr == nil

	// End must not be cut short by ctx: that leaves the producer in an
	// unknown state. It gets its own bound.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	committed, err := s.sess.End(ectx, kgo.TransactionEndTry(commit))
	if err != nil {
		return false, fmt.Errorf("kafka: ending the transaction: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		t := tp{r.Topic, r.Partition}
		m := s.attempts[t]
		if committed {
			if m != nil {
				delete(m, r.Offset)
				if len(m) == 0 {
					delete(s.attempts, t)
				}
			}
			continue
		}
		if m == nil {
			m = map[int64]int{}
			s.attempts[t] = m
		}
		m[r.Offset] = max(m[r.Offset], 1) + 1
	}
	if !committed {
		reason := "the group rebalanced or the offset commit failed"
		switch {
		case herr != nil:
			reason = "handler: " + herr.Error()
		case perr != nil:
			reason = "produce: " + perr.Error()
		}
		s.logger.Warn("wary/kafka: transaction aborted; its input will be consumed again",
			slog.String("group", s.group), slog.Int("records", len(recs)), slog.String("reason", reason))
	}
	return committed, nil
}

// callTx calls h, turning a panic into an error (the transaction aborts).
func callTx(ctx context.Context, h TxHandler, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("kafka: transaction handler panicked: %v", p)
		}
	}()
	return h(ctx, tx)
}

// recordEntries wraps records for materialize.
func recordEntries(recs []*kgo.Record) []*entry {
	es := make([]entry, len(recs))
	out := make([]*entry, len(recs))
	for i, r := range recs {
		es[i] = entry{rec: r, attempt: 1}
		out[i] = &es[i]
	}
	return out
}

// Close ends Run's wait for records and leaves the group; the client
// stays open (the program closes it). A transaction in progress is not
// committed: call Close after Run returned.
func (s *TransactSession) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.sess.AllowRebalance()
		s.sess.Client().LeaveGroup()
	})
	return nil
}
