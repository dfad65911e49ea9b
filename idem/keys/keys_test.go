package keys

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/internal/names"
	"github.com/wary-go/wary/idem/internal/seam"
)

// world is a Caller's: the fake store, a clock the test moves, and a
// provider that records its calls.
type world struct {
	t     *testing.T
	s     *fakeKeys
	clock *memory.FakeClock
	p     *provider
}

func newWorld(t *testing.T) *world {
	return &world{t: t, s: newFakeKeys(t), clock: memory.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), p: &provider{}}
}

// caller returns a Caller for c on the world's store and clock.
func (w *world) caller(c Contract, o *Options) *Caller[*keyTx] {
	w.t.Helper()
	var opts Options
	if o != nil {
		opts = *o
	}
	opts.Now = w.clock.Now
	k, err := New(w.s, c, &opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return k
}

// stage stages key with intent and commits.
func (w *world) stage(k *Caller[*keyTx], key, intent string) Record {
	w.t.Helper()
	tx := w.s.begin()
	rec, err := k.Stage(context.Background(), tx, key, []byte(intent))
	if err != nil {
		w.t.Fatal(err)
	}
	tx.Commit()
	return rec
}

// provider is an external service: it answers each call with answer (nil:
// "ok:" and the intent) and records the keys it was called with.
type provider struct {
	mu     sync.Mutex
	calls  []string
	answer func(ctx context.Context, key string) ([]byte, error)
}

func (p *provider) call(ctx context.Context, key string, intent []byte) ([]byte, error) {
	p.mu.Lock()
	p.calls = append(p.calls, key)
	answer := p.answer
	p.mu.Unlock()
	if answer != nil {
		return answer(ctx, key)
	}
	return []byte("ok:" + string(intent)), nil
}

func (p *provider) called() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

func (p *provider) set(answer func(ctx context.Context, key string) ([]byte, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = answer
}

var errTimeout = errors.New("gateway timeout")

// A staged key is called once, with its key and intent, and its result
// recorded; a duplicate Call returns the recorded outcome without calling.
func TestCallSucceedsOnce(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments"}, &Options{CallTimeout: time.Minute})
	staged := w.stage(k, "pay:order-1:1", "charge 42")
	if staged.State != Staged || staged.Provider != "payments" || string(staged.Intent) != "charge 42" || !staged.CreatedAt.Equal(w.clock.Now()) {
		t.Fatalf("staged %+v", staged)
	}
	var deadline time.Time
	w.p.set(func(ctx context.Context, key string) ([]byte, error) {
		deadline, _ = ctx.Deadline()
		if rec := w.s.rec("payments", key); rec.State != InFlight || rec.Attempts != 1 {
			t.Errorf("during the call: %+v, want in flight, the start recorded first", rec)
		}
		return []byte("charge-id-7"), nil
	})
	start := w.clock.Now()
	w.clock.Advance(time.Second)
	rec, err := k.Call(ctx, "pay:order-1:1", w.p.call)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != Succeeded || string(rec.Result) != "charge-id-7" || rec.Attempts != 1 || !rec.FirstCallAt.Equal(start.Add(time.Second)) ||
		!rec.DoneAt.Equal(w.clock.Now()) {
		t.Errorf("Call: %+v", rec)
	}
	if deadline.IsZero() {
		t.Errorf("the call's context has no deadline (CallTimeout)")
	}
	stored := w.s.rec("payments", "pay:order-1:1")
	if stored.State != Succeeded || string(stored.Result) != "charge-id-7" || !stored.LeaseUntil.IsZero() {
		t.Errorf("stored %+v", stored)
	}
	again, err := k.Call(ctx, "pay:order-1:1", w.p.call)
	if err != nil || string(again.Result) != "charge-id-7" || w.p.called() != 1 {
		t.Errorf("second Call: %+v, %v, %d calls; want the recorded result, no call", again, err, w.p.called())
	}
	if got, ok, err := k.Get(ctx, "pay:order-1:1"); !ok || err != nil || got.State != Succeeded {
		t.Errorf("Get: %+v, %v, %v", got, ok, err)
	}
}

// Stage validates the key, writes in the caller's transaction (a rolled
// back staging leaves nothing to call), returns the stored record when
// staged again with the same intent, and refuses another intent.
func TestStage(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "mailer"}, nil)

	for _, bad := range []string{"", "with space", "tab\t", "é", strings.Repeat("k", MaxLen+1)} {
		tx := w.s.begin()
		if _, err := k.Stage(ctx, tx, bad, nil); !errors.Is(err, names.ErrInvalidName) {
			t.Errorf("Stage(%q): %v, want ErrInvalidName", bad, err)
		}
		tx.Commit()
	}
	if len(w.s.recs) != 0 {
		t.Fatalf("invalid keys stored: %v", w.s.recs)
	}

	tx := w.s.begin()
	if _, err := k.Stage(ctx, tx, "mail:1", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if _, err := k.Call(ctx, "mail:1", w.p.call); !errors.Is(err, ErrNotStaged) || w.p.called() != 0 {
		t.Errorf("Call after a rollback: %v, %d calls; want ErrNotStaged, none", err, w.p.called())
	}

	first := w.stage(k, "mail:1", "hello")
	w.clock.Advance(time.Minute)
	tx = w.s.begin()
	again, err := k.Stage(ctx, tx, "mail:1", []byte("hello"))
	if err != nil || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("Stage again: %+v, %v; want the first record", again, err)
	}
	if _, err := k.Stage(ctx, tx, "mail:1", []byte("goodbye")); !errors.Is(err, ErrConflict) {
		t.Errorf("Stage with another intent: %v, want ErrConflict", err)
	}
	tx.Commit()

	nilIntent := w.stage(k, "mail:2", "")
	if nilIntent.Intent == nil {
		t.Errorf("a nil intent is stored as nil, want empty")
	}
	boom := errors.New("deadlock detected")
	w.s.set(func(s *fakeKeys) { s.stageErr = boom })
	if _, err := k.Stage(ctx, w.s.begin(), "mail:3", nil); !errors.Is(err, boom) {
		t.Errorf("Stage: %v, want %v", err, boom)
	}
}

// New validates the provider's name (ErrInvalidName), the contract and the
// options (broker.ErrInvalid), and the store.
func TestNewValidates(t *testing.T) {
	w := newWorld(t)
	for _, bad := range []string{"", "pay ments", "pay;ments", strings.Repeat("p", names.MaxNameLen+1)} {
		if _, err := New(w.s, Contract{Provider: bad}, nil); !errors.Is(err, names.ErrInvalidName) {
			t.Errorf("provider %q: %v, want ErrInvalidName", bad, err)
		}
	}
	for name, c := range map[string]struct {
		c Contract
		o Options
	}{
		"Retention":   {c: Contract{Retention: -time.Hour}},
		"Margin":      {c: Contract{Margin: -time.Hour}},
		"CallTimeout": {o: Options{CallTimeout: -time.Second}},
	} {
		c.c.Provider = "p"
		if _, err := New(w.s, c.c, &c.o); !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want ErrInvalid naming it", name, err)
		}
	}
	if _, err := New(w.s, Contract{Provider: "p", Retention: time.Hour, Margin: time.Hour}, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("Margin not below Retention: %v, want ErrInvalid", err)
	}
	if _, err := New[*keyTx](nil, Contract{Provider: "p"}, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("nil store: %v, want ErrInvalid", err)
	}
	if _, err := New[*keyTx](noKeys{}, Contract{Provider: "p"}, nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("a store without keys: %v, want ErrInvalid", err)
	}
}

// noKeys is a store whose driver implements nothing of the keys.
type noKeys struct{}

func (noKeys) Driver() seam.Driver[*keyTx] { return seam.NewDriver[*keyTx](struct{}{}) }

// A call that fails for good (an error marked broker.Permanent) is
// recorded Failed, and never called again.
func TestPermanentFailure(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments", Replays: true}, nil)
	w.stage(k, "pay:1", "charge")
	declined := errors.New("card declined")
	w.p.set(func(context.Context, string) ([]byte, error) { return nil, broker.Permanent(declined) })
	rec, err := k.Call(ctx, "pay:1", w.p.call)
	if !errors.Is(err, ErrCallFailed) || !errors.Is(err, declined) || rec.State != Failed || rec.DoneAt.IsZero() {
		t.Fatalf("Call: %+v, %v; want ErrCallFailed with the cause", rec, err)
	}
	if stored := w.s.rec("payments", "pay:1"); stored.State != Failed || !strings.Contains(stored.Error, "card declined") {
		t.Errorf("stored %+v", stored)
	}
	if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrCallFailed) || !strings.Contains(err.Error(), "card declined") || w.p.called() != 1 {
		t.Errorf("second Call: %v, %d calls; want ErrCallFailed, no call", err, w.p.called())
	}
}

// An unknown outcome is retried with the same key only when the provider
// replays outcomes and still remembers the key; otherwise it waits for
// Reconcile (ErrReconcile), without a call.
func TestUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	t.Run("no replays", func(t *testing.T) {
		w := newWorld(t)
		k := w.caller(Contract{Provider: "mailer"}, nil)
		w.stage(k, "mail:1", "hi")
		w.p.set(func(context.Context, string) ([]byte, error) { return nil, errTimeout })
		rec, err := k.Call(ctx, "mail:1", w.p.call)
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, errTimeout) || rec.State != Unknown {
			t.Fatalf("Call: %+v, %v; want ErrOutcomeUnknown", rec, err)
		}
		if _, err := k.Call(ctx, "mail:1", w.p.call); !errors.Is(err, ErrReconcile) || w.p.called() != 1 {
			t.Errorf("second Call: %v, %d calls; want ErrReconcile, no call", err, w.p.called())
		}
		if n, err := k.CallStaged(ctx, w.p.call, 0); n != 0 || err != nil || w.p.called() != 1 {
			t.Errorf("CallStaged: %d, %v, %d calls; want it left for Reconcile", n, err, w.p.called())
		}
	})
	t.Run("replays", func(t *testing.T) {
		w := newWorld(t)
		k := w.caller(Contract{Provider: "payments", Replays: true, Retention: 24 * time.Hour}, nil)
		w.stage(k, "pay:1", "charge")
		w.p.set(func(context.Context, string) ([]byte, error) { return nil, errTimeout })
		if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("Call: %v", err)
		}
		first := w.s.rec("payments", "pay:1").FirstCallAt
		w.p.set(nil)
		w.clock.Advance(time.Hour)
		rec, err := k.Call(ctx, "pay:1", w.p.call)
		if err != nil || rec.State != Succeeded || rec.Attempts != 2 || !rec.FirstCallAt.Equal(first) || !rec.LastCallAt.Equal(w.clock.Now()) {
			t.Fatalf("retry: %+v, %v; want succeeded at the second attempt", rec, err)
		}
		if w.p.calls[0] != "pay:1" || w.p.calls[1] != "pay:1" {
			t.Errorf("calls %v, want the same key twice", w.p.calls)
		}
	})
	t.Run("forgotten", func(t *testing.T) {
		w := newWorld(t)
		// Retention 10h, Margin 1h by default: a retry 9h after the first
		// call may find the key forgotten.
		k := w.caller(Contract{Provider: "payments", Replays: true, Retention: 10 * time.Hour}, nil)
		w.stage(k, "pay:1", "charge")
		w.p.set(func(context.Context, string) ([]byte, error) { return nil, errTimeout })
		if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("Call: %v", err)
		}
		w.clock.Advance(9*time.Hour - time.Second)
		if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrOutcomeUnknown) || w.p.called() != 2 {
			t.Fatalf("retry within retention less margin: %v, %d calls", err, w.p.called())
		}
		w.clock.Advance(time.Second)
		_, err := k.Call(ctx, "pay:1", w.p.call)
		if !errors.Is(err, ErrReconcile) || !strings.Contains(err.Error(), "forgotten") || w.p.called() != 2 {
			t.Errorf("retry at retention less margin: %v, %d calls; want ErrReconcile, no call", err, w.p.called())
		}
	})
}

// A call in flight holds its key: another Call returns ErrInFlight without
// calling, and so does a Call whose start another caller won.
func TestInFlight(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments", Replays: true}, nil)
	w.stage(k, "pay:1", "charge")
	inside, release := make(chan struct{}), make(chan struct{})
	w.p.set(func(context.Context, string) ([]byte, error) {
		close(inside)
		<-release
		return []byte("done"), nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := k.Call(ctx, "pay:1", w.p.call)
		done <- err
	}()
	<-inside
	if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrInFlight) {
		t.Errorf("Call during the call: %v, want ErrInFlight", err)
	}
	if n, err := k.CallStaged(ctx, w.p.call, 0); n != 0 || err != nil {
		t.Errorf("CallStaged during the call: %d, %v; want the key skipped", n, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.p.called() != 1 {
		t.Errorf("%d calls, want 1", w.p.called())
	}

	w.stage(k, "pay:2", "charge")
	w.s.set(func(s *fakeKeys) { s.lostStart = true })
	if _, err := k.Call(ctx, "pay:2", w.p.call); !errors.Is(err, ErrInFlight) || !strings.Contains(err.Error(), "another caller") || w.p.called() != 1 {
		t.Errorf("Call that lost the start: %v, %d calls; want ErrInFlight, no call", err, w.p.called())
	}
}

// A caller that dies between the call and the record (the AfterCall
// failpoint) leaves the key in flight until its lease ends; then it is
// unresolved: a provider that replays is called again with the same key,
// one that does not is marked Unknown and resolved by Reconcile, after
// which Call returns the reconciled outcome without calling.
func TestCrashBetweenCallAndRecord(t *testing.T) {
	crash := errors.New("killed")
	crashing := failpoint.WithAfterCall(context.Background(), func(string) error { return crash })
	ctx := context.Background()
	for _, replays := range []bool{false, true} {
		w := newWorld(t)
		k := w.caller(Contract{Provider: "payments", Replays: replays}, &Options{CallTimeout: time.Minute})
		w.stage(k, "pay:1", "charge")
		if _, err := k.Call(crashing, "pay:1", w.p.call); !errors.Is(err, crash) {
			t.Fatalf("replays %v: Call: %v, want the crash", replays, err)
		}
		rec := w.s.rec("payments", "pay:1")
		if rec.State != InFlight || !rec.LeaseUntil.Equal(w.clock.Now().Add(time.Minute)) || rec.Attempts != 1 {
			t.Fatalf("replays %v: after the crash %+v, want in flight for CallTimeout", replays, rec)
		}
		if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrInFlight) {
			t.Errorf("replays %v: Call within the lease: %v, want ErrInFlight", replays, err)
		}
		if u, err := k.Unresolved(ctx, 0); len(u) != 0 || err != nil {
			t.Errorf("replays %v: unresolved within the lease: %v, %v", replays, u, err)
		}
		w.clock.Advance(time.Minute)
		if u, err := k.Unresolved(ctx, 0); len(u) != 1 || err != nil {
			t.Fatalf("replays %v: unresolved after the lease: %v, %v", replays, u, err)
		}
		if replays {
			n, err := k.CallStaged(ctx, w.p.call, 0)
			if n != 1 || err != nil || w.p.called() != 2 {
				t.Fatalf("CallStaged: %d, %v, %d calls; want the call made again", n, err, w.p.called())
			}
			if rec := w.s.rec("payments", "pay:1"); rec.State != Succeeded || rec.Attempts != 2 {
				t.Errorf("after the retry: %+v", rec)
			}
			continue
		}
		if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, ErrReconcile) || w.p.called() != 1 {
			t.Fatalf("Call after the lease: %v, %d calls; want ErrReconcile, no call", err, w.p.called())
		}
		if rec := w.s.rec("payments", "pay:1"); rec.State != Unknown {
			t.Fatalf("after the lease: %s, want unknown", rec.State)
		}
		n, err := k.Reconcile(ctx, func(_ context.Context, rec Record) (Outcome, error) {
			if rec.Key != "pay:1" || string(rec.Intent) != "charge" {
				t.Errorf("reconcile asked about %+v", rec)
			}
			return Outcome{State: Succeeded, Result: []byte("found ch_9")}, nil
		})
		if n != 1 || err != nil {
			t.Fatalf("Reconcile: %d, %v", n, err)
		}
		rec, err = k.Call(ctx, "pay:1", w.p.call)
		if err != nil || string(rec.Result) != "found ch_9" || w.p.called() != 1 {
			t.Errorf("Call after Reconcile: %+v, %v, %d calls", rec, err, w.p.called())
		}
	}
}

// Reconcile records each answer: Succeeded and Failed end a key, Staged
// makes it callable again as if never called, Unknown (or InFlight) and
// an error leave it for later; the errors are joined.
func TestReconcileAnswers(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "mailer"}, nil)
	w.p.set(func(context.Context, string) ([]byte, error) { return nil, errTimeout })
	for _, key := range []string{"k:ok", "k:failed", "k:never", "k:unknown", "k:error", "k:inflight"} {
		w.stage(k, key, "x")
		w.clock.Advance(time.Second)
		if _, err := k.Call(ctx, key, w.p.call); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatal(err)
		}
	}
	u, err := k.Unresolved(ctx, 2)
	if err != nil || len(u) != 2 || u[0].Key != "k:ok" || u[1].Key != "k:failed" {
		t.Fatalf("Unresolved(2): %v, %v; want the oldest two", u, err)
	}
	lookupFailed := errors.New("provider API down")
	n, err := k.Reconcile(ctx, func(_ context.Context, rec Record) (Outcome, error) {
		switch rec.Key {
		case "k:ok":
			return Outcome{State: Succeeded, Result: []byte("r")}, nil
		case "k:failed":
			return Outcome{State: Failed, Error: "bounced"}, nil
		case "k:never":
			return Outcome{State: Staged}, nil
		case "k:unknown":
			return Outcome{State: Unknown}, nil
		case "k:inflight":
			return Outcome{State: InFlight}, nil
		}
		return Outcome{}, lookupFailed
	})
	if n != 3 || !errors.Is(err, lookupFailed) || !strings.Contains(err.Error(), "k:error") {
		t.Fatalf("Reconcile: %d, %v; want 3 resolved and the lookup's error", n, err)
	}
	for key, want := range map[string]State{"k:ok": Succeeded, "k:failed": Failed, "k:never": Staged, "k:unknown": Unknown,
		"k:error": Unknown, "k:inflight": Unknown} {
		if got := w.s.rec("mailer", key); got.State != want {
			t.Errorf("%s: %s, want %s", key, got.State, want)
		}
	}
	if rec := w.s.rec("mailer", "k:never"); !rec.FirstCallAt.IsZero() {
		t.Errorf("k:never: first call at %s, want none (as if never called)", rec.FirstCallAt)
	}
	w.p.set(nil)
	if n, err := k.CallStaged(ctx, w.p.call, 0); n != 1 || err != nil {
		t.Errorf("CallStaged: %d, %v; want k:never called again", n, err)
	}
	if rec := w.s.rec("mailer", "k:never"); rec.State != Succeeded || rec.Attempts != 2 {
		t.Errorf("k:never: %+v", rec)
	}
	boom := errors.New("conn refused")
	w.s.set(func(s *fakeKeys) { s.listErr = boom })
	if _, err := k.Reconcile(ctx, nil); !errors.Is(err, boom) {
		t.Errorf("Reconcile: %v, want %v", err, boom)
	}
	w.s.set(func(s *fakeKeys) { s.listErr, s.finishErr = nil, boom })
	if _, err := k.Reconcile(ctx, func(context.Context, Record) (Outcome, error) { return Outcome{State: Failed}, nil }); !errors.Is(err, boom) {
		t.Errorf("Reconcile: %v, want %v", err, boom)
	}
}

// CallStaged calls the keys whose caller died before calling, up to
// limit, and reports how many succeeded and the others' errors.
func TestCallStaged(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "mailer"}, nil)
	for _, key := range []string{"m:1", "m:2", "m:3", "m:4"} {
		w.stage(k, key, key)
		w.clock.Advance(time.Second)
	}
	other := w.caller(Contract{Provider: "sms"}, nil)
	w.stage(other, "s:1", "x")
	w.p.set(func(_ context.Context, key string) ([]byte, error) {
		if key == "m:2" {
			return nil, broker.Permanent(errors.New("no such mailbox"))
		}
		return []byte("sent"), nil
	})
	n, err := k.CallStaged(ctx, w.p.call, 3)
	if n != 2 || !errors.Is(err, ErrCallFailed) {
		t.Fatalf("CallStaged(3): %d, %v; want 2 and m:2's failure", n, err)
	}
	if got := strings.Join(w.p.calls, ","); got != "m:1,m:2,m:3" {
		t.Errorf("calls %s, want the oldest three of the provider", got)
	}
	if n, err := k.CallStaged(ctx, w.p.call, 0); n != 1 || err != nil {
		t.Errorf("CallStaged: %d, %v; want m:4", n, err)
	}
	if rec := w.s.rec("sms", "s:1"); rec.State != Staged {
		t.Errorf("another provider's key: %s", rec.State)
	}
	boom := errors.New("conn refused")
	w.s.set(func(s *fakeKeys) { s.listErr = boom })
	if _, err := k.CallStaged(ctx, w.p.call, 0); !errors.Is(err, boom) {
		t.Errorf("CallStaged: %v, want %v", err, boom)
	}
}

// A call that panics leaves its outcome unknown (the panic may have come
// after the provider acted), recorded, with the panic's text.
func TestCallPanics(t *testing.T) {
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments"}, nil)
	w.stage(k, "pay:1", "x")
	w.p.set(func(context.Context, string) ([]byte, error) { panic("nil map") })
	if _, err := k.Call(context.Background(), "pay:1", w.p.call); !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "nil map") {
		t.Fatalf("Call: %v, want ErrOutcomeUnknown with the panic", err)
	}
	if rec := w.s.rec("payments", "pay:1"); rec.State != Unknown || !strings.Contains(rec.Error, "panic") {
		t.Errorf("stored %+v", rec)
	}
}

// The store's failures reach the caller, wrapped; a failure to record an
// outcome says which.
func TestStoreFailures(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments"}, nil)
	w.stage(k, "pay:1", "x")
	boom := errors.New("conn reset")
	w.s.set(func(s *fakeKeys) { s.getErr = boom })
	if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, boom) {
		t.Errorf("Call, failing read: %v", err)
	}
	if _, _, err := k.Get(ctx, "pay:1"); !errors.Is(err, boom) {
		t.Errorf("Get: %v", err)
	}
	w.s.set(func(s *fakeKeys) { s.getErr, s.startErr = nil, boom })
	if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, boom) || w.p.called() != 0 {
		t.Errorf("Call, failing start: %v, %d calls; want no call", err, w.p.called())
	}
	w.s.set(func(s *fakeKeys) { s.startErr, s.finishErr = nil, boom })
	if _, err := k.Call(ctx, "pay:1", w.p.call); !errors.Is(err, boom) || !strings.Contains(err.Error(), "record outcome") {
		t.Errorf("Call, failing record: %v", err)
	}
	if rec := w.s.rec("payments", "pay:1"); rec.State != InFlight {
		t.Errorf("after a failed record: %s, want in flight until its lease ends", rec.State)
	}
}

// Purge deletes the provider's done keys older than before, batch at a
// time, and keeps the others.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments"}, nil)
	for _, key := range []string{"p:1", "p:2", "p:3", "p:4", "p:5"} {
		w.stage(k, key, "x")
		if _, err := k.Call(ctx, key, w.p.call); err != nil {
			t.Fatal(err)
		}
	}
	w.stage(k, "p:staged", "x")
	other := w.caller(Contract{Provider: "mailer"}, nil)
	w.stage(other, "m:1", "x")
	if _, err := other.Call(ctx, "m:1", w.p.call); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Hour)
	w.stage(k, "p:recent", "x")
	if _, err := k.Call(ctx, "p:recent", w.p.call); err != nil {
		t.Fatal(err)
	}
	n, err := k.Purge(ctx, w.clock.Now(), 2)
	if n != 5 || err != nil {
		t.Fatalf("Purge: %d, %v; want 5", n, err)
	}
	if len(w.s.purges) != 3 {
		t.Errorf("purge calls %v, want 2, 2, 1", w.s.purges)
	}
	if len(w.s.recs) != 3 {
		t.Errorf("left %d keys, want p:staged, p:recent, m:1", len(w.s.recs))
	}
	w.s.set(func(s *fakeKeys) { s.purges = nil })
	if n, err := k.Purge(ctx, w.clock.Now().Add(time.Second), 0); n != 1 || err != nil || len(w.s.purges) != 2 {
		t.Errorf("Purge with batch 0: %d, %v, calls %v; want batches of 1", n, err, w.s.purges)
	}
	boom := errors.New("locked")
	w.s.set(func(s *fakeKeys) { s.purgeErr = boom })
	if _, err := k.Purge(ctx, w.clock.Now(), 10); !errors.Is(err, boom) {
		t.Errorf("Purge: %v", err)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Staged: "staged", InFlight: "in flight", Succeeded: "succeeded", Failed: "failed",
		Unknown: "unknown", 9: "State(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", int(s), s.String(), want)
		}
	}
}

// A call that outlives its lease while another caller starts the key
// again does not record its outcome over the other attempt's: Call
// returns ErrInFlight and the key as the other caller left it.
func TestCallOutlivesLease(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	k := w.caller(Contract{Provider: "payments", Replays: true, Retention: 24 * time.Hour}, &Options{CallTimeout: time.Minute})
	w.stage(k, "pay:1", "charge")
	inside, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	w.p.set(func(context.Context, string) ([]byte, error) {
		held := false
		first.Do(func() { held = true })
		if held {
			close(inside)
			<-release
			return []byte("first"), nil
		}
		return []byte("second"), nil
	})
	type result struct {
		rec Record
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := k.Call(ctx, "pay:1", w.p.call)
		done <- result{rec, err}
	}()
	<-inside
	w.clock.Advance(2 * time.Minute) // the first call's lease runs out
	rec, err := k.Call(ctx, "pay:1", w.p.call)
	if err != nil || rec.State != Succeeded || string(rec.Result) != "second" || rec.Attempts != 2 {
		t.Fatalf("second caller: %+v, %v; want succeeded with its own result, attempt 2", rec, err)
	}
	close(release)
	r := <-done
	if !errors.Is(r.err, ErrInFlight) || !strings.Contains(r.err.Error(), "not recorded") {
		t.Errorf("first caller: %v, want ErrInFlight saying its outcome was not recorded", r.err)
	}
	if r.rec.State != Succeeded || string(r.rec.Result) != "second" {
		t.Errorf("first caller's record: %+v, want the second caller's", r.rec)
	}
	got, _, _ := k.Get(ctx, "pay:1")
	if string(got.Result) != "second" || got.Attempts != 2 {
		t.Errorf("stored: %+v, want the second attempt's outcome", got)
	}
}
