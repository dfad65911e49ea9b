package outbox

// An in-memory fake of the store seam below Outbox and Relay (outboxStore,
// relayStore and the seam.Source a relay publishes from), as gocloud tests
// pubsub against a fake driver: rows in a slice, a transaction type whose
// writes show at Commit, a polling source that claims the head of each
// aggregate, fault switches, and a broadcast fired on every change, so
// that a test waits for what it expects instead of sleeping. The SQL
// implementation is checked by the store suites (idem/internal/idemtest).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/signal"
)

var (
	_ outboxStore[*fakeTx] = (*fakeStore)(nil)
	_ relayStore           = (*fakeStore)(nil)
	_ streamStatuser       = (*fakeStore)(nil)
	_ seam.Source[Row]     = (*fakeSource)(nil)
)

// fakeTx is a transaction of the fake store: its rows join the table when
// it commits, and vanish if it rolls back.
type fakeTx struct {
	s    *fakeStore
	rows []Row
	done bool
}

func (tx *fakeTx) Commit() {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	if tx.done {
		tx.s.t.Errorf("fake: commit of a finished transaction")
		return
	}
	tx.done = true
	for _, r := range tx.rows {
		tx.s.nextID++
		r.RowID = tx.s.nextID
		tx.s.rows = append(tx.s.rows, r)
		tx.s.seqs[r.AggregateID] = r.Sequence
	}
	tx.s.changed()
}

func (tx *fakeTx) Rollback() {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	tx.done, tx.rows = true, nil
}

// faults are the fake store's switches; a test sets them under the store's
// lock (fakeStore.set).
type faults struct {
	add, open, next, settle, health, list, setState, purge, close error
	// settleGate, if not nil, holds every Settle until it is closed.
	settleGate chan struct{}
}

// fakeStore is the in-memory store.
type fakeStore struct {
	t testing.TB

	mu      sync.Mutex
	rows    []Row // committed, in RowID order
	seqs    map[string]int64
	nextID  int64
	f       faults
	events  signal.Broadcast // fired on every change (waitFor)
	freed   signal.Broadcast // fired by Settle: a waiting Next may claim
	nexts   int              // Next calls
	perAgg  int              // most rows of one aggregate a claim takes (default 10)
	depth   int              // live batches a source hands out at once (default 1)
	state   seam.SourceState // what the sources report (Kind "poll" if empty)
	srcs    []*fakeSource
	configs []seam.SourceConfig
	stream  *StreamStatus // what OutboxStreamStatus reports (nil: an error)
	adds    int           // AddOutbox calls
	purges  []int
	settles []settled
}

// settled is a Settle call as the source received it.
type settled struct {
	rows []int64 // the batch's row IDs
	out  *seam.Outcome
}

func newFakeStore(t testing.TB) *fakeStore {
	return &fakeStore{t: t, seqs: map[string]int64{}, perAgg: 10, depth: 1}
}

// Driver implements seam.Provider (idem.Store).
func (s *fakeStore) Driver() seam.Driver[*fakeTx] { return seam.NewDriver[*fakeTx](s) }

// begin starts a transaction.
func (s *fakeStore) begin() *fakeTx { return &fakeTx{s: s} }

// set changes the store under its lock (a fault switch, the source's
// state) and wakes the waiters.
func (s *fakeStore) set(f func(s *fakeStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
	s.changed()
}

// changed wakes the waiters; s.mu is held.
func (s *fakeStore) changed() { s.events.Fire() }

// put commits rows as another writer would (no validation): RowID and,
// when zero, Sequence and State Pending are the store's.
func (s *fakeStore) put(rows ...Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		s.nextID++
		r.RowID = s.nextID
		if r.Sequence == 0 {
			s.seqs[r.AggregateID]++
			r.Sequence = s.seqs[r.AggregateID]
		}
		s.rows = append(s.rows, r)
	}
	s.changed()
}

// row returns the row with the given ID.
func (s *fakeStore) row(id int64) Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if r.RowID == id {
			return r
		}
	}
	s.t.Fatalf("fake: no row %d", id)
	return Row{}
}

// all returns a copy of the committed rows.
func (s *fakeStore) all() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rows)
}

// settleCalls returns the Settle calls so far.
func (s *fakeStore) settleCalls() []settled {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.settles)
}

// waitFor waits until cond, read under the store's lock, holds; every
// change of the store wakes it. It fails the test after a long time, as a
// guard against a hang, not as a timing assertion.
func (s *fakeStore) waitFor(what string, cond func() bool) {
	s.t.Helper()
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		s.mu.Lock()
		ch := s.events.Wait()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-guard.C:
			s.t.Fatalf("fake: gave up waiting for %s", what)
		}
	}
}

// AddOutbox implements outboxStore: each message gets the next sequence of
// its aggregate, counting the transaction's own rows.
func (s *fakeStore) AddOutbox(_ context.Context, tx *fakeTx, msgs []Message, at time.Time) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adds++
	if s.f.add != nil {
		return nil, s.f.add
	}
	if tx.done {
		s.t.Errorf("fake: AddOutbox in a finished transaction")
	}
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seq := s.seqs[m.AggregateID]
		for _, r := range tx.rows {
			if r.AggregateID == m.AggregateID {
				seq = max(seq, r.Sequence)
			}
		}
		m.Headers = m.Headers.Clone()
		m.Payload = slices.Clone(m.Payload)
		seqs[i] = seq + 1
		tx.rows = append(tx.rows, Row{Message: m, Sequence: seq + 1, State: Pending, CreatedAt: at})
	}
	return seqs, nil
}

// OutboxSource implements relayStore.
func (s *fakeStore) OutboxSource(_ context.Context, c seam.SourceConfig) (seam.Source[Row], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configs = append(s.configs, c)
	if s.f.open != nil {
		return nil, s.f.open
	}
	src := &fakeSource{s: s, c: c, live: map[*fakeBatch]bool{}, busy: map[string]bool{}}
	s.srcs = append(s.srcs, src)
	s.changed()
	return src, nil
}

// OutboxHealth implements relayStore.
func (s *fakeStore) OutboxHealth(_ context.Context, now time.Time) (Health, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var h Health
	if s.f.health != nil {
		return h, s.f.health
	}
	for _, r := range s.rows {
		switch r.State {
		case Pending:
			h.Backlog++
			if r.Attempts > 0 {
				h.Retrying++
			}
		case Quarantined:
			h.Quarantined++
		default:
			continue
		}
		if h.OldestUnsent.IsZero() || r.CreatedAt.Before(h.OldestUnsent) {
			h.OldestUnsent = r.CreatedAt
		}
	}
	if !h.OldestUnsent.IsZero() {
		h.OldestUnsentAge = now.Sub(h.OldestUnsent)
	}
	return h, nil
}

// ListOutbox implements relayStore.
func (s *fakeStore) ListOutbox(_ context.Context, f Filter) ([]Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f.list != nil {
		return nil, s.f.list
	}
	var out []Row
	for _, r := range s.rows {
		if len(f.States) > 0 && !slices.Contains(f.States, r.State) ||
			f.AggregateID != "" && r.AggregateID != f.AggregateID || f.AfterRow > 0 && r.RowID <= f.AfterRow {
			continue
		}
		if f.NoPayload {
			r.Payload = nil
		}
		out = append(out, r)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

// SetOutboxState implements relayStore. It wakes no source: a relay's
// Requeue and Discard do.
func (s *fakeStore) SetOutboxState(_ context.Context, rowID int64, to State, at time.Time, from ...State) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f.setState != nil {
		return false, s.f.setState
	}
	for i := range s.rows {
		r := &s.rows[i]
		if r.RowID != rowID || !slices.Contains(from, r.State) {
			continue
		}
		r.State = to
		switch to {
		case Pending:
			r.Attempts, r.NextAttempt = 0, time.Time{}
		case Discarded:
			r.SentAt = at
		}
		return true, nil
	}
	return false, nil
}

// PurgeOutbox implements relayStore.
func (s *fakeStore) PurgeOutbox(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed()
	if s.f.purge != nil {
		s.purges = append(s.purges, 0)
		return 0, s.f.purge
	}
	n := 0
	s.rows = slices.DeleteFunc(s.rows, func(r Row) bool {
		if n < limit && (r.State == Sent || r.State == Discarded) && r.SentAt.Before(before) {
			n++
			return true
		}
		return false
	})
	s.purges = append(s.purges, n)
	return n, nil
}

// OutboxStreamStatus implements streamStatuser.
func (s *fakeStore) OutboxStreamStatus(context.Context) (StreamStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		return StreamStatus{}, errors.New("fake: no stream")
	}
	return *s.stream, nil
}

// fakeSource claims, at each Next, the head of each aggregate that no live
// batch holds (its lowest unsent row, if pending and due) and the pending
// rows behind it, as the polling sources do. Waiting, it wakes on the
// relay's Wake or Changed, or a Settle, never on a commit or a timer (as
// a SQLite store without its poll): a test wakes a running relay as an
// in-process producer does, with Relay.Wake.
type fakeSource struct {
	s *fakeStore
	c seam.SourceConfig

	// Under s.mu:
	live    map[*fakeBatch]bool
	busy    map[string]bool // aggregates of live batches
	closed  bool
	idle    int64
	waiting bool // in Next, waiting for a wake-up
}

// fakeBatch is a batch's handle.
type fakeBatch struct {
	rows    []int64
	aggs    []string
	lost    context.Context
	lose    context.CancelFunc
	settled bool
}

// Next implements seam.Source.
func (src *fakeSource) Next(ctx context.Context, wait bool) (*seam.Batch[Row], error) {
	s := src.s
	for {
		woken, moved := src.c.Woken(), src.c.Changed()
		s.mu.Lock()
		if src.closed {
			s.t.Errorf("fake: Next after Close")
		}
		s.nexts++
		s.changed()
		if err := s.f.next; err != nil {
			s.mu.Unlock()
			return nil, err
		}
		var b *seam.Batch[Row]
		if len(src.live) < s.depth {
			b = src.claim(src.c.Now())
		}
		if b != nil || !wait {
			s.mu.Unlock()
			return b, nil
		}
		src.idle++
		src.waiting = true
		s.changed()
		ch := s.freed.Wait()
		s.mu.Unlock()
		select {
		case <-woken:
		case <-moved:
		case <-ch:
		case <-ctx.Done():
		}
		s.mu.Lock()
		src.waiting = false
		s.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// claim takes the due heads and what follows them; s.mu is held.
func (src *fakeSource) claim(now time.Time) *seam.Batch[Row] {
	s := src.s
	h := &fakeBatch{}
	h.lost, h.lose = context.WithCancel(context.Background())
	var rows []Row
	seen := map[string]bool{}
	for _, r := range s.rows {
		a := r.AggregateID
		if seen[a] || src.busy[a] || len(rows) == src.c.BatchSize {
			continue
		}
		seen[a] = true
		taken := 0
		for _, q := range s.rows { // the aggregate's unsent rows, in sequence order
			if q.AggregateID != a || q.State == Sent || q.State == Discarded {
				continue
			}
			if q.State != Pending || q.NextAttempt.After(now) || taken == s.perAgg || len(rows) == src.c.BatchSize {
				break
			}
			rows = append(rows, q)
			h.rows = append(h.rows, q.RowID)
			taken++
		}
		if taken > 0 {
			src.busy[a] = true
			h.aggs = append(h.aggs, a)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	src.live[h] = true
	s.changed()
	return &seam.Batch[Row]{Rows: rows, Lost: h.lost, Handle: h}
}

// Settle implements seam.Source.
func (src *fakeSource) Settle(_ context.Context, b *seam.Batch[Row], out *seam.Outcome) error {
	s := src.s
	h := b.Handle.(*fakeBatch)
	s.mu.Lock()
	gate := s.f.settleGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed()
	defer s.freed.Fire()
	if h.settled || !src.live[h] {
		s.t.Errorf("fake: Settle of a batch that is not live (rows %v)", h.rows)
		return errors.New("fake: batch not live")
	}
	h.settled = true
	delete(src.live, h)
	for _, a := range h.aggs {
		delete(src.busy, a)
	}
	call := settled{rows: h.rows}
	if out != nil {
		o := *out
		o.Sent, o.Failed = slices.Clone(out.Sent), slices.Clone(out.Failed)
		call.out = &o
	}
	s.settles = append(s.settles, call)
	if out == nil {
		return nil
	}
	if h.lost.Err() != nil {
		return ErrLeaseLost
	}
	if s.f.settle != nil {
		return s.f.settle
	}
	for i := range s.rows {
		r := &s.rows[i]
		if slices.Contains(out.Sent, r.RowID) {
			if !slices.Contains(h.rows, r.RowID) {
				s.t.Errorf("fake: row %d marked sent, not in the batch %v", r.RowID, h.rows)
			}
			r.State, r.SentAt = Sent, out.At
		}
		for _, f := range out.Failed {
			if f.RowID != r.RowID {
				continue
			}
			r.Attempts++
			r.LastError = f.Error
			if f.Quarantine {
				r.State = Quarantined
			} else {
				r.NextAttempt = f.NextAttempt
			}
		}
	}
	return nil
}

// State implements seam.Source.
func (src *fakeSource) State() seam.SourceState {
	src.s.mu.Lock()
	defer src.s.mu.Unlock()
	st := src.s.state
	if st.Kind == "" {
		st.Kind = "poll"
	}
	st.Idle = src.idle
	return st
}

// Close implements seam.Source: every batch must be settled by then.
func (src *fakeSource) Close(context.Context) error {
	s := src.s
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed()
	if len(src.live) > 0 {
		s.t.Errorf("fake: Close with %d batches live", len(src.live))
	}
	if src.closed {
		s.t.Errorf("fake: Close twice")
	}
	src.closed = true
	return s.f.close
}

// liveBatches returns the batches handed out and not yet settled, over
// every source.
func (s *fakeStore) liveBatches() []*fakeBatch {
	var out []*fakeBatch
	for _, src := range s.srcs {
		for h := range src.live {
			out = append(out, h)
		}
	}
	return out
}

// faultTopic is a driver.Topic over a memory broker's topic whose sends a
// test can fail or hold, message by message.
type faultTopic struct {
	inner *broker.Topic

	mu sync.Mutex
	// fail, if not nil, is asked for each message of a send; the first
	// error fails the whole send, and nothing of it is sent.
	fail     func(m *driver.Message, batch int) error
	sends    int // SendBatch calls
	inFlight int
	most     int // the most SendBatch calls in flight at once
	sent     []string
	// stall, if not nil, holds every send: it is told the send started,
	// and the send fails when its context is done.
	stall chan struct{}
}

var _ driver.Topic = (*faultTopic)(nil)

// errFlaky is a transient publish failure.
var errFlaky = errors.New("fake: broker unavailable")

func (f *faultTopic) setFail(fail func(m *driver.Message, batch int) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *faultTopic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	f.mu.Lock()
	f.sends++
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	fail, stall := f.fail, f.stall
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if stall != nil {
		stall <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	if fail != nil {
		for _, m := range msgs {
			if err := fail(m, len(msgs)); err != nil {
				return err
			}
		}
	}
	out := make([]*broker.Message, len(msgs))
	for i, m := range msgs {
		out[i] = &broker.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}
	}
	if err := f.inner.Publish(ctx, out...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		f.sent = append(f.sent, m.ID)
	}
	return nil
}

func (f *faultTopic) Capabilities() capability.Topic { return f.inner.Capabilities() }

func (f *faultTopic) Classify(err error) driver.ErrorInfo {
	switch {
	case errors.Is(err, errFlaky):
		return driver.ErrorInfo{Code: driver.Unavailable}
	case errors.Is(err, broker.ErrInvalid):
		return driver.ErrorInfo{Code: driver.Invalid}
	case errors.Is(err, broker.ErrTooLarge):
		return driver.ErrorInfo{Code: driver.TooLarge}
	case errors.Is(err, context.Canceled):
		return driver.ErrorInfo{Code: driver.Canceled}
	}
	return driver.ErrorInfo{}
}

func (f *faultTopic) As(any) bool             { return false }
func (f *faultTopic) ErrorAs(error, any) bool { return false }
func (f *faultTopic) Close() error            { return nil }

// rig is a relay's world: the fake store, a memory broker's topic behind a
// faultTopic, a subscription on it, and a clock the test moves.
type rig struct {
	t     *testing.T
	s     *fakeStore
	ft    *faultTopic
	topic *broker.Topic
	sub   *broker.Subscription
	clock *memory.FakeClock
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, nil)
}

func newRigWith(t *testing.T, cfg *memory.TopicConfig) *rig {
	t.Helper()
	b := memory.New(nil)
	if err := b.CreateTopic("events", cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("events", "check"); err != nil {
		t.Fatal(err)
	}
	inner, err := b.OpenTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.OpenSubscription("events", "check", nil)
	if err != nil {
		t.Fatal(err)
	}
	ft := &faultTopic{inner: inner}
	// One try per Publish: the relay's own retries are under test.
	topic := broker.NewTopic(ft, &broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}})
	t.Cleanup(func() {
		_ = sub.Close()
		_ = topic.Close()
		_ = inner.Close()
		_ = b.Close()
	})
	return &rig{t: t, s: newFakeStore(t), ft: ft, topic: topic, sub: sub, clock: newClock()}
}

// relay returns a relay on the rig with o (nil: defaults), on the rig's
// clock and a logger that records.
func (g *rig) relay(o *RelayOptions) *Relay {
	g.t.Helper()
	var opts RelayOptions
	if o != nil {
		opts = *o
	}
	if opts.Now == nil {
		opts.Now = g.clock.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := NewRelay(g.s, g.topic, &opts)
	if err != nil {
		g.t.Fatal(err)
	}
	return r
}

// add commits msgs through an Outbox on the rig's store.
func (g *rig) add(msgs ...*Message) {
	g.t.Helper()
	box, err := New(g.s, &Options{Telemetry: broker.Telemetry{Now: g.clock.Now}})
	if err != nil {
		g.t.Fatal(err)
	}
	tx := g.s.begin()
	if _, err := box.Add(context.Background(), tx, msgs...); err != nil {
		g.t.Fatal(err)
	}
	tx.Commit()
}

// msg is a message of aggregate agg at version v, its ID agg/v.
func msg(agg string, v int64) *Message {
	return &Message{ID: fmt.Sprintf("%s/%d", agg, v), AggregateID: agg, Version: v, Type: "thing.happened",
		Payload: []byte(fmt.Sprintf(`{"v":%d}`, v))}
}

// receive receives n messages from the rig's subscription, acknowledged.
func (g *rig) receive(n int) []*broker.Message {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*broker.Message
	for len(out) < n {
		ds, err := g.sub.Receive(ctx, n-len(out))
		if err != nil {
			g.t.Fatalf("received %d of %d messages: %v", len(out), n, err)
		}
		for _, d := range ds {
			out = append(out, d.Message)
			if err := d.Ack(ctx); err != nil {
				g.t.Fatal(err)
			}
		}
	}
	return out
}

// sent returns the IDs of the messages the broker took, in order.
func (g *rig) sent() []string {
	g.ft.mu.Lock()
	defer g.ft.mu.Unlock()
	return slices.Clone(g.ft.sent)
}

// ids returns the messages' IDs.
func ids(ms []*broker.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// inOrder checks that each aggregate's messages came in sequence order,
// each once.
func inOrder(t *testing.T, ms []*broker.Message) {
	t.Helper()
	last := map[string]int64{}
	for _, m := range ms {
		seq, err := strconv.ParseInt(m.Headers.Get(broker.HeaderSequence), 10, 64)
		if err != nil {
			t.Fatalf("message %s: sequence header %q", m.ID, m.Headers.Get(broker.HeaderSequence))
		}
		if seq != last[m.Key]+1 {
			t.Errorf("aggregate %s: sequence %d after %d (order %v)", m.Key, seq, last[m.Key], ids(ms))
		}
		last[m.Key] = seq
	}
}

// newClock returns a clock the test moves.
func newClock() *memory.FakeClock {
	return memory.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}
