package outbox

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/failpoint"
)

// Drain publishes every due row, each aggregate's in sequence order,
// across batches, as a message with the row's ID, the aggregate as key,
// the event headers over the row's own and the payload as body; it marks
// the rows sent at the relay's clock, counts them, and closes its source.
func TestDrainPublishesEachAggregateInOrder(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	g.s.perAgg = 2
	var msgs []*Message
	for v := int64(1); v <= 5; v++ {
		for _, a := range []string{"a", "b", "c"} {
			msgs = append(msgs, msg(a, v))
		}
	}
	msgs[0].Headers = broker.Headers{{"traceparent", "00-x"}, {"tenant", "t1"}}
	msgs[1].Version, msgs[1].Type = 0, ""
	g.add(msgs...)
	r := g.relay(&RelayOptions{BatchSize: 4})

	n, err := r.Drain(ctx)
	if err != nil || n != 15 {
		t.Fatalf("Drain: %d, %v; want 15, nil", n, err)
	}
	got := g.receive(15)
	inOrder(t, got)
	byID := map[string]*broker.Message{}
	for _, m := range got {
		byID[m.ID] = m
	}
	first := byID["a/1"]
	want := broker.Headers{{"traceparent", "00-x"}, {"tenant", "t1"}, {broker.HeaderAggregateID, "a"},
		{broker.HeaderAggregateVersion, "1"}, {broker.HeaderSequence, "1"}, {broker.HeaderType, "thing.happened"}}
	if first == nil || first.Key != "a" || string(first.Body) != `{"v":1}` || !sameHeaders(first.Headers, want) {
		t.Errorf("a/1 published as %+v, want key a, headers %v", first, want)
	}
	if m := byID["b/1"]; m == nil || m.Headers.Get(broker.HeaderAggregateVersion) != "" || m.Headers.Get(broker.HeaderType) != "" {
		t.Errorf("b/1 (version 0, no type) published with headers %v", m.Headers)
	}
	for _, row := range g.s.all() {
		if row.State != Sent || !row.SentAt.Equal(g.clock.Now()) {
			t.Errorf("row %d (%s): %s at %s, want sent at %s", row.RowID, row.ID, row.State, row.SentAt, g.clock.Now())
		}
	}
	st := r.Stats()
	if st.Published != 15 || st.Claims < 4 || st.Failed != 0 || st.Quarantines != 0 || st.LastError != "" || st.Throughput <= 0 {
		t.Errorf("stats %+v, want 15 published in at least 4 claims, nothing failed", st)
	}
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	if len(g.s.srcs) != 1 || !g.s.srcs[0].closed {
		t.Errorf("Drain opened %d sources; want one, closed", len(g.s.srcs))
	}
}

// sameHeaders reports whether got holds exactly want.
func sameHeaders(got, want broker.Headers) bool { return got.Equal(want) }

// RunOnce takes one batch from one source it keeps open across calls;
// with nothing due it returns 0; Drain then closes that source.
func TestRunOnceKeepsItsSource(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	r := g.relay(&RelayOptions{BatchSize: 2})
	if n, err := r.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("RunOnce of nothing: %d, %v", n, err)
	}
	g.add(msg("a", 1), msg("a", 2), msg("a", 3))
	if n, err := r.RunOnce(ctx); n != 2 || err != nil {
		t.Fatalf("RunOnce: %d, %v; want 2", n, err)
	}
	if n, err := r.Drain(ctx); n != 1 || err != nil {
		t.Fatalf("Drain: %d, %v; want 1", n, err)
	}
	inOrder(t, g.receive(3))
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	if len(g.s.srcs) != 1 || !g.s.srcs[0].closed {
		t.Errorf("%d sources opened; want one, closed by Drain", len(g.s.srcs))
	}
	c := g.s.configs[0]
	if c.Owner != r.Owner() || c.BatchSize != 2 || c.PollInterval != time.Second || c.Now == nil || c.Note == nil {
		t.Errorf("source config %+v", c)
	}
}

// Run hands the source's batches to the topic as they come, several at
// once when the source allows, and takes an aggregate's next batch only
// after the last one was settled: with both batches' settles held, the
// two were published, and the third row of the first aggregate waits.
func TestRunPipelinesBatches(t *testing.T) {
	g := newRig(t)
	g.s.depth, g.s.perAgg = 2, 2
	gate := make(chan struct{})
	g.s.set(func(s *fakeStore) { s.f.settleGate = gate })
	g.add(msg("a", 1), msg("a", 2), msg("a", 3), msg("b", 1), msg("b", 2))
	r := g.relay(&RelayOptions{BatchSize: 2, PurgeInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	first := g.receive(4)
	inOrder(t, first)
	if slices.Contains(ids(first), "a/3") {
		t.Fatalf("a/3 published before a's batch was settled: %v", ids(first))
	}
	g.s.mu.Lock()
	live := len(g.s.liveBatches())
	g.s.mu.Unlock()
	if live != 2 {
		t.Fatalf("%d batches live, want 2", live)
	}
	close(gate)
	last := g.receive(1)
	inOrder(t, append(first, last...))
	g.s.waitFor("a/3 sent", func() bool { return len(g.s.rows) == 5 && g.s.rows[2].State == Sent })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := r.Stats(); got.Published != 5 || got.Claims != 3 {
		t.Errorf("stats %+v, want 5 published in 3 claims", got)
	}
}

// A running relay waits for a Wake (an in-process producer's commit) and
// for Requeue, which both make it look for rows at once; Stats reports the
// source's idle rounds.
func TestRunWakes(t *testing.T) {
	g := newRig(t)
	g.s.set(func(s *fakeStore) { s.state.Listening = true })
	r := g.relay(&RelayOptions{MaxAttempts: 1, PurgeInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	idle := func() int64 { return g.s.srcs[0].idle }
	g.s.waitFor("Run to wait", func() bool { return len(g.s.srcs) == 1 && idle() > 0 })
	g.add(msg("a", 1)) // the fake source does not wake on a commit
	r.Wake()
	if got := g.receive(1); got[0].ID != "a/1" {
		t.Fatalf("published %v", ids(got))
	}

	g.ft.setFail(func(m *driver.Message, _ int) error {
		if m.ID == "a/2" {
			return errFlaky
		}
		return nil
	})
	g.add(msg("a", 2))
	r.Wake()
	g.s.waitFor("a/2 quarantined", func() bool { return g.s.rows[1].State == Quarantined })
	g.ft.setFail(nil)
	if ok, err := r.Requeue(context.Background(), g.s.all()[1].RowID); !ok || err != nil {
		t.Fatalf("Requeue: %v, %v", ok, err)
	}
	if got := g.receive(1); got[0].ID != "a/2" {
		t.Fatalf("published %v", ids(got))
	}
	st := r.Stats()
	if !st.Listening || st.Idle == 0 {
		t.Errorf("stats %+v: want the source's Listening and its idle rounds", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A failed publish is retried with backoff, then quarantined with its
// reason after MaxAttempts; its aggregate's later rows wait behind it,
// the other aggregates flow; Requeue makes it pending again, and it goes.
func TestPublishFailureRetriesThenQuarantines(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	g.ft.setFail(func(m *driver.Message, _ int) error {
		if m.Key == "bad" {
			return errFlaky
		}
		return nil
	})
	g.add(msg("bad", 1), msg("bad", 2), msg("good", 1), msg("good", 2))
	r := g.relay(&RelayOptions{MaxAttempts: 3, Backoff: broker.Backoff{Initial: time.Second, Max: 10 * time.Second}})

	rows := g.s.all()
	bad := rows[0].RowID
	for attempt := 1; attempt <= 3; attempt++ {
		n, err := r.Drain(ctx)
		if err != nil {
			t.Fatalf("attempt %d: Drain: %v", attempt, err)
		}
		row := g.s.row(bad)
		if row.Attempts != attempt || !strings.Contains(row.LastError, errFlaky.Error()) {
			t.Fatalf("attempt %d: row %+v, want %d attempts and the error", attempt, row, attempt)
		}
		if attempt < 3 {
			ceiling := time.Second << (attempt - 1)
			if row.State != Pending || row.NextAttempt.Before(g.clock.Now()) || row.NextAttempt.After(g.clock.Now().Add(ceiling)) {
				t.Fatalf("attempt %d: %s, next attempt %s; want pending, within %s of %s", attempt, row.State, row.NextAttempt, ceiling, g.clock.Now())
			}
			if n2, err := r.Drain(ctx); n2 != 0 || err != nil || g.s.row(bad).Attempts != attempt {
				t.Fatalf("attempt %d: a Drain before the backoff ran out published %d (%v), attempts %d", attempt, n2, err, g.s.row(bad).Attempts)
			}
			g.add(msg("good", int64(attempt+2)))
			g.clock.Advance(ceiling)
		} else if row.State != Quarantined {
			t.Fatalf("after %d attempts: %s, want quarantined", attempt, row.State)
		}
		if attempt == 1 && n != 2 || attempt > 1 && n != 1 {
			t.Errorf("attempt %d: Drain published %d rows of good", attempt, n)
		}
	}
	if st := g.s.row(rows[1].RowID).State; st != Pending {
		t.Errorf("bad/2: %s, want pending behind bad/1", st)
	}
	got := g.receive(4)
	for _, m := range got {
		if m.Key != "good" {
			t.Errorf("published %s", m.ID)
		}
	}
	inOrder(t, got)
	st := r.Stats()
	if st.Failed != 3 || st.Quarantines != 1 || st.Published != 4 || !strings.Contains(st.LastError, "bad/1") || !st.LastErrorAt.Equal(g.clock.Now()) {
		t.Errorf("stats %+v; want 3 failed, 1 quarantined, 4 published, the last error bad/1's", st)
	}
	q, err := r.Quarantined(ctx, 0)
	if err != nil || len(q) != 1 || q[0].RowID != bad {
		t.Fatalf("Quarantined: %v, %v; want bad/1", q, err)
	}
	h, err := r.Health(ctx)
	if err != nil || h.Quarantined != 1 || h.Backlog != 1 || h.Published != 4 {
		t.Errorf("Health: %+v, %v; want 1 quarantined, 1 pending, 4 published", h, err)
	}

	g.ft.setFail(nil)
	if ok, err := r.Requeue(ctx, bad); !ok || err != nil {
		t.Fatalf("Requeue: %v, %v", ok, err)
	}
	if row := g.s.row(bad); row.State != Pending || row.Attempts != 0 {
		t.Fatalf("requeued: %+v", row)
	}
	if ok, err := r.Requeue(ctx, bad); ok || err != nil {
		t.Errorf("Requeue of a pending row: %v, %v; want false", ok, err)
	}
	if n, err := r.Drain(ctx); n != 2 || err != nil {
		t.Fatalf("Drain after Requeue: %d, %v", n, err)
	}
	if got := ids(g.receive(2)); !slices.Equal(got, []string{"bad/1", "bad/2"}) {
		t.Errorf("published %v, want bad/1, bad/2", got)
	}
}

// A row that can never be published (too large, refused as invalid, or an
// error marked permanent) is quarantined at its first failure.
func TestPermanentFailureQuarantinesAtOnce(t *testing.T) {
	for name, fail := range map[string]error{
		"permanent": broker.Permanent(errors.New("the schema registry refuses it")),
		"invalid":   broker.ErrInvalid,
		"too large": broker.ErrTooLarge,
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t)
			g.ft.setFail(func(m *driver.Message, _ int) error {
				if m.Key == "bad" {
					return fail
				}
				return nil
			})
			g.add(msg("bad", 1), msg("ok", 1))
			r := g.relay(nil)
			if n, err := r.Drain(context.Background()); n != 1 || err != nil {
				t.Fatalf("Drain: %d, %v", n, err)
			}
			row := g.s.all()[0]
			if row.State != Quarantined || row.Attempts != 1 || row.LastError == "" {
				t.Errorf("row %+v, want quarantined at once with its error", row)
			}
			if st := r.Stats(); st.Quarantines != 1 || st.Failed != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
	// The broker's own size limit, before anything is sent.
	g := newRigWith(t, &memory.TopicConfig{MaxMessageSize: 64})
	g.add(&Message{ID: "big", AggregateID: "a", Payload: make([]byte, 100)})
	r := g.relay(nil)
	if n, err := r.Drain(context.Background()); n != 0 || err != nil {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	if row := g.s.all()[0]; row.State != Quarantined || !strings.Contains(row.LastError, "large") {
		t.Errorf("row %+v, want quarantined as too large", row)
	}
}

// A row the store could not decode, or that breaks Add's rules, is
// quarantined at once with its reason, never published nor dropped; its
// aggregate's earlier rows go, its later rows wait, other aggregates flow.
func TestInvalidRowQuarantined(t *testing.T) {
	g := newRig(t)
	undecodable := errors.Join(ErrInvalidMessage, errors.New("headers are not a JSON object of strings"))
	at := g.clock.Now()
	g.s.put(
		Row{Message: *msg("x", 1), CreatedAt: at},
		Row{Message: Message{ID: "x/2", AggregateID: "x"}, Invalid: undecodable, CreatedAt: at},
		Row{Message: *msg("x", 3), CreatedAt: at},
		Row{Message: *msg("y", 1), CreatedAt: at},
		Row{Message: Message{ID: "", AggregateID: ""}, Invalid: ErrInvalidMessage, CreatedAt: at},
	)
	r := g.relay(nil)
	n, err := r.Drain(context.Background())
	if n != 2 || err != nil {
		t.Fatalf("Drain: %d, %v; want x/1 and y/1", n, err)
	}
	if got := ids(g.receive(2)); !slices.Contains(got, "x/1") || !slices.Contains(got, "y/1") {
		t.Errorf("published %v", got)
	}
	if sent := g.sent(); len(sent) != 2 {
		t.Errorf("the broker took %v, want x/1 and y/1", sent)
	}
	rows := g.s.all()
	for i, want := range []State{Sent, Quarantined, Pending, Sent, Quarantined} {
		if rows[i].State != want {
			t.Errorf("row %d (%q): %s, want %s", rows[i].RowID, rows[i].ID, rows[i].State, want)
		}
	}
	if !strings.Contains(rows[1].LastError, "JSON object") || rows[1].Attempts != 1 {
		t.Errorf("undecodable row: %+v, want its reason as last error", rows[1])
	}
	if st := r.Stats(); st.Quarantines != 2 {
		t.Errorf("stats %+v, want 2 quarantines", st)
	}
	// A row another writer put in the table, not flagged by the store,
	// that the broker refuses (a header with an empty name): quarantined
	// at its first failure, the other aggregate's row goes.
	g.s.put(Row{Message: Message{ID: "h/1", AggregateID: "h", Headers: broker.Headers{{"", "x"}}}, CreatedAt: at},
		Row{Message: *msg("w", 1), CreatedAt: at})
	if n, err := r.Drain(context.Background()); n != 1 || err != nil {
		t.Fatalf("Drain: %d, %v; want w/1", n, err)
	}
	if got := ids(g.receive(1)); got[0] != "w/1" {
		t.Errorf("published %v", got)
	}
	if row := g.s.all()[5]; row.State != Quarantined || row.Attempts != 1 {
		t.Errorf("h/1: %+v, want quarantined at once", row)
	}
	// A batch of one invalid row alone.
	g.s.put(Row{Message: Message{ID: "z/1", AggregateID: "z"}, Invalid: ErrInvalidMessage, CreatedAt: at})
	if n, err := r.Drain(context.Background()); n != 0 || err != nil {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	if row := g.s.all()[7]; row.ID != "z/1" || row.State != Quarantined {
		t.Errorf("z/1: %+v, want quarantined", row)
	}
}

// When a batch's Publish fails, the relay publishes it again aggregate by
// aggregate, Concurrency at a time, each in order; the source is told what
// went and what failed, at the relay's clock.
func TestBatchFailurePublishesByAggregate(t *testing.T) {
	g := newRig(t)
	g.ft.setFail(func(m *driver.Message, batch int) error {
		if batch > 1 || m.ID == "c/2" {
			return errFlaky
		}
		return nil
	})
	for v := int64(1); v <= 3; v++ {
		g.add(msg("a", v), msg("b", v), msg("c", v), msg("d", v), msg("e", v))
	}
	r := g.relay(&RelayOptions{Concurrency: 2})
	if n, err := r.RunOnce(context.Background()); n != 13 || err != nil {
		t.Fatalf("RunOnce: %d, %v; want 13 (all but c/2 and c/3)", n, err)
	}
	inOrder(t, g.receive(13))
	if g.ft.most > 2 {
		t.Errorf("%d publishes at once, want at most Concurrency 2", g.ft.most)
	}
	calls := g.s.settleCalls()
	if len(calls) != 1 || calls[0].out == nil {
		t.Fatalf("settles %+v", calls)
	}
	out := calls[0].out
	if len(out.Sent) != 13 || len(out.Failed) != 1 || !out.At.Equal(g.clock.Now()) {
		t.Fatalf("outcome %+v", out)
	}
	f := out.Failed[0]
	if row := g.s.row(f.RowID); row.ID != "c/2" || f.Quarantine || !strings.Contains(f.Error, errFlaky.Error()) {
		t.Errorf("failure %+v of %s, want c/2 to back off", f, row.ID)
	}
}

// A Settle that fails leaves the rows unmarked: RunOnce says they will be
// published again, and counts nothing published; the next round
// publishes them again, with the same IDs.
func TestSettleFailure(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	g.add(msg("a", 1), msg("a", 2))
	boom := errors.New("connection reset")
	g.s.set(func(s *fakeStore) { s.f.settle = boom })
	r := g.relay(nil)
	if _, err := r.RunOnce(ctx); !errors.Is(err, boom) || !strings.Contains(err.Error(), "published again") {
		t.Fatalf("RunOnce: %v, want %v", err, boom)
	}
	if st := r.Stats(); st.Published != 0 {
		t.Errorf("stats %+v, want nothing published", st)
	}
	g.s.set(func(s *fakeStore) { s.f.settle = nil })
	if n, err := r.Drain(ctx); n != 2 || err != nil {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	if got := ids(g.receive(4)); !slices.Equal(got, []string{"a/1", "a/2", "a/1", "a/2"}) {
		t.Errorf("published %v, want the batch twice", got)
	}
}

// A batch whose claim is lost (its Lost context done) is released, not
// marked: RunOnce returns ErrLeaseLost, and the rows stay pending.
func TestLostBatch(t *testing.T) {
	g := newRig(t)
	g.add(msg("a", 1), msg("b", 1))
	g.ft.setFail(func(*driver.Message, int) error {
		g.s.mu.Lock()
		for _, h := range g.s.liveBatches() {
			h.lose()
		}
		g.s.mu.Unlock()
		return nil
	})
	r := g.relay(nil)
	if _, err := r.RunOnce(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("RunOnce: %v, want ErrLeaseLost", err)
	}
	calls := g.s.settleCalls()
	if len(calls) != 1 || calls[0].out != nil {
		t.Fatalf("settles %+v, want one release", calls)
	}
	for _, row := range g.s.all() {
		if row.State != Pending || row.Attempts != 0 {
			t.Errorf("row %+v, want pending, untouched", row)
		}
	}
	if st := r.Stats(); st.Published != 0 {
		t.Errorf("stats %+v", st)
	}
}

// The AfterPublish failpoint acts as a crash between publish and mark:
// the batch is released unmarked, RunOnce returns the failpoint's error,
// and the rows go again, with the same IDs, in the batch's path and in the
// path aggregate by aggregate.
func TestAfterPublishCrash(t *testing.T) {
	crash := errors.New("crash")
	for _, byAggregate := range []bool{false, true} {
		t.Run(strconv.FormatBool(byAggregate), func(t *testing.T) {
			g := newRig(t)
			if byAggregate {
				g.ft.setFail(func(_ *driver.Message, batch int) error {
					if batch > 1 {
						return errFlaky
					}
					return nil
				})
			}
			g.add(msg("a", 1), msg("a", 2))
			r := g.relay(nil)
			ctx := failpoint.WithAfterPublish(context.Background(), func(m *broker.Message) error {
				if m.ID == "a/2" {
					return crash
				}
				return nil
			})
			if _, err := r.RunOnce(ctx); !errors.Is(err, crash) {
				t.Fatalf("RunOnce: %v, want the crash", err)
			}
			if calls := g.s.settleCalls(); len(calls) != 1 || calls[0].out != nil {
				t.Fatalf("settles %+v, want one release", calls)
			}
			if n, err := r.Drain(context.Background()); n != 2 || err != nil {
				t.Fatalf("Drain: %d, %v", n, err)
			}
			if got := ids(g.receive(4)); !slices.Equal(got, []string{"a/1", "a/2", "a/1", "a/2"}) {
				t.Errorf("published %v", got)
			}
		})
	}
}

// ErrOtherSource: RunOnce and Drain return it when the source says the
// outbox is served by another kind of source, at open or at Next; Run
// notes a failing Next and tries again.
func TestOtherSource(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	g.add(msg("a", 1))
	other := errors.Join(ErrOtherSource, errors.New("a relay streams the outbox"))
	g.s.set(func(s *fakeStore) { s.f.next = other })
	r := g.relay(&RelayOptions{PollInterval: time.Millisecond, PurgeInterval: -1})
	if _, err := r.RunOnce(ctx); !errors.Is(err, ErrOtherSource) {
		t.Errorf("RunOnce: %v, want ErrOtherSource", err)
	}
	if _, err := r.Drain(ctx); !errors.Is(err, ErrOtherSource) {
		t.Errorf("Drain: %v, want ErrOtherSource", err)
	}
	g.s.set(func(s *fakeStore) { s.f.open = other })
	if _, err := r.Drain(ctx); !errors.Is(err, ErrOtherSource) {
		t.Errorf("Drain, failing open: %v, want ErrOtherSource", err)
	}
	if err := r.Run(ctx); !errors.Is(err, ErrOtherSource) {
		t.Errorf("Run, failing open: %v, want ErrOtherSource", err)
	}

	g.s.set(func(s *fakeStore) { s.f.open = nil; s.nexts = 0 })
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	// Run notes the first failure before it calls Next again.
	g.s.waitFor("Run to try again", func() bool { return g.s.nexts >= 2 })
	if st := r.Stats(); !strings.Contains(st.LastError, "another kind") {
		t.Errorf("stats %+v, want the source's error as the last error", st)
	}
	g.s.set(func(s *fakeStore) { s.f.next = nil; s.state.Standby = true })
	if got := g.receive(1); got[0].ID != "a/1" {
		t.Fatalf("published %v", ids(got))
	}
	if st := r.Stats(); !st.Standby {
		t.Errorf("stats %+v, want the source's Standby", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A Drain that ends while another call still publishes a batch of the
// source they share does not close it under that batch (giving up a lease
// another relay could take): the last of them closes it, once nothing is
// live.
func TestConcurrentDrainsCloseTheSourceLast(t *testing.T) {
	for _, first := range []string{"Drain", "RunOnce"} {
		t.Run(first, func(t *testing.T) {
			g := newRig(t)
			inside, release := make(chan struct{}), make(chan struct{})
			g.ft.setFail(func(m *driver.Message, _ int) error {
				if m.ID == "a/1" {
					close(inside)
					<-release
				}
				return nil
			})
			g.add(msg("a", 1))
			r := g.relay(nil)
			done := make(chan error, 1)
			go func() {
				var err error
				if first == "Drain" {
					_, err = r.Drain(context.Background())
				} else {
					_, err = r.RunOnce(context.Background())
				}
				done <- err
			}()
			<-inside
			if n, err := r.Drain(context.Background()); n != 0 || err != nil {
				t.Fatalf("Drain beside the batch: %d, %v", n, err)
			}
			g.s.mu.Lock()
			closed := g.s.srcs[0].closed
			g.s.mu.Unlock()
			if closed {
				t.Fatalf("the source was closed under a live batch")
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			g.s.mu.Lock()
			defer g.s.mu.Unlock()
			if !g.s.srcs[0].closed || g.s.rows[0].State != Sent {
				t.Errorf("source closed %v, row %s; want closed after a/1 was sent", g.s.srcs[0].closed, g.s.rows[0].State)
			}
		})
	}
}

// A flow: producers commit to many aggregates while Run publishes with
// batches pipelined; every first publish of half the aggregates fails and
// backs off. In the end every row was published and marked sent, each
// aggregate's rows reached the broker in sequence order (a failed row's
// later rows were held behind it), and the stats count what happened.
func TestRunFlow(t *testing.T) {
	g := newRig(t)
	g.s.depth, g.s.perAgg = 3, 3
	var failedOnce sync.Map
	g.ft.setFail(func(m *driver.Message, batch int) error {
		// The batch holding it fails; then its own publish, once.
		if a, _ := strconv.Atoi(strings.TrimPrefix(m.Key, "agg-")); a%2 == 1 {
			return nil
		}
		if batch > 1 {
			if _, failed := failedOnce.Load(m.ID); !failed {
				return errFlaky
			}
			return nil
		}
		if _, failed := failedOnce.LoadOrStore(m.ID, true); !failed {
			return errFlaky
		}
		return nil
	})
	r := g.relay(&RelayOptions{BatchSize: 7, Concurrency: 3, PurgeInterval: -1,
		Backoff: broker.Backoff{Initial: time.Second, Max: time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	const aggs, versions = 12, 6
	for v := int64(1); v <= versions; v++ {
		var msgs []*Message
		for a := range aggs {
			msgs = append(msgs, msg("agg-"+strconv.Itoa(a), v))
		}
		g.add(msgs...)
		r.Wake()
	}
	allSent := func() bool {
		for _, row := range g.s.rows {
			if row.State != Sent {
				return false
			}
		}
		return len(g.s.rows) == aggs*versions
	}
	g.s.waitFor("Run to open its source", func() bool { return len(g.s.srcs) == 1 })
	for {
		g.s.mu.Lock()
		idle, finished := g.s.srcs[0].idle, allSent()
		g.s.mu.Unlock()
		if finished {
			break
		}
		g.clock.Advance(time.Second) // the failed rows' backoff runs out
		r.Wake()
		// The source waits again, with nothing live: what was due was
		// handled (or it was woken meanwhile, and the next round sees).
		g.s.waitFor("the relay to settle down", func() bool {
			src := g.s.srcs[0]
			return allSent() || src.waiting && len(src.live) == 0 && src.idle > idle
		})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := g.receive(len(g.sent()))
	var firsts []*broker.Message
	seen := map[string]bool{}
	for _, m := range got {
		if !seen[m.ID] {
			seen[m.ID] = true
			firsts = append(firsts, m)
		}
	}
	if len(seen) != aggs*versions {
		t.Fatalf("%d distinct messages published, want %d", len(seen), aggs*versions)
	}
	// Copies may come (a batch's Publish failed after the broker took some
	// of it), but each aggregate's first copies come in sequence order.
	inOrder(t, firsts)
	st := r.Stats()
	if st.Published != aggs*versions || st.Failed == 0 || st.Quarantines != 0 {
		t.Errorf("stats %+v, want %d published, failures retried, nothing quarantined", st, aggs*versions)
	}
}
