package idemtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/failpoint"
	"github.com/wary-go/wary/idem/keys"
)

// FakeProvider is an external service that honours idempotency keys: the
// first call with a key has the effect and stores the result; later calls
// with the key return that result (Replays) or an error, and have no
// effect. It counts calls and effects per key.
type FakeProvider struct {
	Replays bool
	mu      sync.Mutex
	calls   map[string]int
	effects map[string]int
	results map[string][]byte
	// down, while set, makes calls fail before reaching the provider.
	down bool
}

// NewFakeProvider returns an empty provider.
func NewFakeProvider(replays bool) *FakeProvider {
	return &FakeProvider{Replays: replays, calls: map[string]int{}, effects: map[string]int{}, results: map[string][]byte{}}
}

// Call is an keys.CallFunc.
func (p *FakeProvider) Call(_ context.Context, key string, intent []byte) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return nil, errors.New("provider: connection timed out")
	}
	p.calls[key]++
	if string(intent) == "decline" {
		return nil, broker.Permanent(errors.New("provider: declined"))
	}
	if res, ok := p.results[key]; ok {
		if p.Replays {
			return res, nil
		}
		return nil, errors.New("provider: key already used")
	}
	p.effects[key]++
	res := []byte("receipt:" + key + ":" + string(intent))
	p.results[key] = res
	return res, nil
}

// Lookup is what a reconciliation asks the provider: the result of key,
// if it saw it.
func (p *FakeProvider) Lookup(key string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, ok := p.results[key]
	return res, ok
}

// Reconcile is an keys.ReconcileFunc asking Lookup.
func (p *FakeProvider) Reconcile(_ context.Context, rec keys.Record) (keys.Outcome, error) {
	if res, ok := p.Lookup(rec.Key); ok {
		return keys.Outcome{State: keys.Succeeded, Result: res}, nil
	}
	return keys.Outcome{State: keys.Staged, Error: "provider never saw the key"}, nil
}

// Calls and Effects count per key.
func (p *FakeProvider) Calls(key string) int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls[key] }
func (p *FakeProvider) Effects(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effects[key]
}

// SetDown makes calls fail before reaching the provider (or not).
func (p *FakeProvider) SetDown(down bool) { p.mu.Lock(); defer p.mu.Unlock(); p.down = down }

// RunKeys runs the idempotency-key scenarios on a store (its keys'
// part).
func RunKeys[Tx any](t *testing.T, f Factory[Tx]) {
	t.Run("Keys", func(t *testing.T) { testKeys(t, f) })
	t.Run("KeysCrashAfterCall", func(t *testing.T) { testKeysCrash(t, f) })
	t.Run("KeysReconcile", func(t *testing.T) { testKeysReconcile(t, f) })
}

type keysEnv[Tx any] struct {
	*Env[Tx]
	ks    Driver[Tx]
	clock *fakeNow
}

func setupKeys[Tx any](t *testing.T, f Factory[Tx]) *keysEnv[Tx] {
	e := Setup(t, f, "")
	return &keysEnv[Tx]{Env: e, ks: e.Driver, clock: &fakeNow{t: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

func (e *keysEnv[Tx]) keys(c keys.Contract) *keys.Caller[Tx] {
	e.T.Helper()
	k, err := keys.New(e.Store, c, &keys.Options{Telemetry: broker.Telemetry{Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)}, CallTimeout: time.Minute})
	if err != nil {
		e.T.Fatal(err)
	}
	return k
}

func (e *keysEnv[Tx]) stage(k *keys.Caller[Tx], key, intent string) {
	e.T.Helper()
	e.InTx(func(tx Tx) error { _, err := k.Stage(e.Ctx, tx, key, []byte(intent)); return err })
}

func testKeys[Tx any](t *testing.T, f Factory[Tx]) {
	e := setupKeys(t, f)
	p := NewFakeProvider(true)
	k := e.keys(keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true})
	for _, bad := range []string{"", "has space", "é", "tab\t", strings.Repeat("k", keys.MaxLen+1)} {
		e.InTx(func(tx Tx) error {
			if _, err := k.Stage(e.Ctx, tx, bad, nil); !errors.Is(err, idem.ErrInvalidName) {
				t.Errorf("Stage(%q): %v, want ErrInvalidName", bad, err)
			}
			return nil
		})
	}
	if _, err := keys.New(e.Store, keys.Contract{Provider: "bad name"}, nil); !errors.Is(err, idem.ErrInvalidName) {
		t.Errorf("bad provider name: %v", err)
	}
	// A rolled-back stage leaves nothing to call.
	tx, _ := e.Driver.Begin(e.Ctx)
	if _, err := k.Stage(e.Ctx, tx, "payment:order-1:attempt-1", []byte("100 EUR")); err != nil {
		t.Fatal(err)
	}
	_ = e.Driver.Rollback(e.Ctx, tx)
	if _, err := k.Call(e.Ctx, "payment:order-1:attempt-1", p.Call); !errors.Is(err, keys.ErrNotStaged) {
		t.Errorf("Call of a rolled-back key: %v, want ErrKeyNotStaged", err)
	}
	e.stage(k, "payment:order-1:attempt-1", "100 EUR")
	e.stage(k, "payment:order-1:attempt-1", "100 EUR") // staging again is harmless
	e.InTx(func(tx Tx) error {
		if _, err := k.Stage(e.Ctx, tx, "payment:order-1:attempt-1", []byte("200 EUR")); !errors.Is(err, keys.ErrConflict) {
			t.Errorf("Stage with another intent: %v, want ErrKeyConflict", err)
		}
		return nil
	})
	rec, err := k.Call(e.Ctx, "payment:order-1:attempt-1", p.Call)
	if err != nil || rec.State != keys.Succeeded || string(rec.Result) != "receipt:payment:order-1:attempt-1:100 EUR" || rec.Attempts != 1 {
		t.Fatalf("Call: %+v, %v", rec, err)
	}
	again, err := k.Call(e.Ctx, "payment:order-1:attempt-1", p.Call)
	if err != nil || string(again.Result) != string(rec.Result) || p.Calls("payment:order-1:attempt-1") != 1 {
		t.Errorf("second Call: %+v, %v; provider saw %d calls, want 1 (the stored result)", again, err, p.Calls("payment:order-1:attempt-1"))
	}
	// A permanent failure is recorded and not retried.
	e.stage(k, "payment:order-2:attempt-1", "decline")
	if _, err := k.Call(e.Ctx, "payment:order-2:attempt-1", p.Call); !errors.Is(err, keys.ErrCallFailed) {
		t.Errorf("declined: %v, want ErrCallFailed", err)
	}
	if _, err := k.Call(e.Ctx, "payment:order-2:attempt-1", p.Call); !errors.Is(err, keys.ErrCallFailed) || p.Calls("payment:order-2:attempt-1") != 1 {
		t.Errorf("declined again: %v, %d calls", err, p.Calls("payment:order-2:attempt-1"))
	}
	// Concurrent callers of one staged key: one call reaches the provider.
	e.stage(k, "payment:order-3:attempt-1", "5 EUR")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := k.Call(e.Ctx, "payment:order-3:attempt-1", p.Call); err != nil && !errors.Is(err, keys.ErrInFlight) {
				t.Errorf("concurrent Call: %v", err)
			}
		})
	}
	wg.Wait()
	if n := p.Calls("payment:order-3:attempt-1"); n != 1 {
		t.Errorf("concurrent callers: the provider saw %d calls, want 1", n)
	}
	// Purge deletes finished keys past the retention only.
	e.stage(k, "payment:order-4:attempt-1", "1 EUR")
	e.clock.Advance(48 * time.Hour)
	if n, err := k.Purge(e.Ctx, e.clock.Now().Add(-24*time.Hour), 2); n != 3 || err != nil {
		t.Errorf("Purge: %d, %v; want 3 (two succeeded, one failed)", n, err)
	}
	if _, ok, _ := k.Get(e.Ctx, "payment:order-4:attempt-1"); !ok {
		t.Error("a staged key was purged")
	}
}

func testKeysCrash[Tx any](t *testing.T, f Factory[Tx]) {
	e := setupKeys(t, f)
	p := NewFakeProvider(true)
	crash := errors.New("the caller dies after the call, before recording it")
	crashes := 0
	k := e.keys(keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true})
	ctx := failpoint.WithAfterCall(e.Ctx, func(string) error {
		if crashes == 0 {
			crashes++
			return crash
		}
		return nil
	})
	const key = "payment:order-7:attempt-1"
	// The consumer's transaction decides the payment and stages the key
	// with the order; the call runs after the commit.
	e.InTx(func(tx Tx) error {
		if err := e.DB.Exec(e.Ctx, tx, `INSERT INTO orders (id, status) VALUES ('order-7', 'paying')`); err != nil {
			return err
		}
		_, err := k.Stage(e.Ctx, tx, key, []byte("42 EUR"))
		return err
	})
	if _, err := k.Call(ctx, key, p.Call); !errors.Is(err, crash) || crashes != 1 {
		t.Fatalf("Call: %v; the failpoint must fire", err)
	}
	rec, _, _ := k.Get(e.Ctx, key)
	if rec.State != keys.InFlight || p.Effects(key) != 1 {
		t.Fatalf("after the crash: %+v, effects %d", rec, p.Effects(key))
	}
	// The restarted process retries at once: the key is still held.
	if _, err := k.Call(ctx, key, p.Call); !errors.Is(err, keys.ErrInFlight) {
		t.Errorf("retry within the call timeout: %v, want ErrCallInFlight", err)
	}
	e.clock.Advance(2 * time.Minute)
	if u, err := k.Unresolved(e.Ctx, 0); err != nil || len(u) != 1 || u[0].Key != key {
		t.Errorf("unresolved: %+v, %v", u, err)
	}
	// Retry with the same key: the provider replays, no second effect.
	if n, err := k.CallStaged(ctx, p.Call, 0); n != 1 || err != nil {
		t.Fatalf("CallStaged: %d, %v", n, err)
	}
	rec, _, _ = k.Get(e.Ctx, key)
	if rec.State != keys.Succeeded || rec.Attempts != 2 || string(rec.Result) != "receipt:"+key+":42 EUR" {
		t.Errorf("after the retry: %+v", rec)
	}
	if p.Calls(key) != 2 || p.Effects(key) != 1 {
		t.Errorf("provider: %d calls (want 2, same key), %d effects (want 1)", p.Calls(key), p.Effects(key))
	}
	// A key staged, then the process died before calling: CallStaged
	// makes the call.
	e.stage(k, "payment:order-8:attempt-1", "1 EUR")
	if n, err := k.CallStaged(ctx, p.Call, 0); n != 1 || err != nil || p.Effects("payment:order-8:attempt-1") != 1 {
		t.Errorf("CallStaged of a never-called key: %d, %v", n, err)
	}
}

func testKeysReconcile[Tx any](t *testing.T, f Factory[Tx]) {
	e := setupKeys(t, f)
	// A provider that does not replay: an unknown outcome is never sent
	// again automatically.
	noReplay := NewFakeProvider(false)
	crashed := map[string]bool{}
	crashOnce := func(key string) error {
		if !crashed[key] {
			crashed[key] = true
			return fmt.Errorf("crash after calling %s", key)
		}
		return nil
	}
	mail := e.keys(keys.Contract{Provider: "mailer", Retention: time.Hour})
	ctx := failpoint.WithAfterCall(e.Ctx, crashOnce)
	e.stage(mail, "mail:order-9:confirmation", "to customer of order-9")
	if _, err := mail.Call(ctx, "mail:order-9:confirmation", noReplay.Call); err == nil {
		t.Fatal("the failpoint did not fire")
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := mail.Call(ctx, "mail:order-9:confirmation", noReplay.Call); !errors.Is(err, keys.ErrReconcile) {
		t.Errorf("retry without replay: %v, want ErrReconcile", err)
	}
	if n, _ := mail.CallStaged(ctx, noReplay.Call, 0); n != 0 || noReplay.Calls("mail:order-9:confirmation") != 1 {
		t.Errorf("CallStaged sent an unknown outcome to a provider that does not replay")
	}
	if n, err := mail.Reconcile(ctx, noReplay.Reconcile); n != 1 || err != nil {
		t.Errorf("Reconcile: %d, %v", n, err)
	}
	if rec, _, _ := mail.Get(e.Ctx, "mail:order-9:confirmation"); rec.State != keys.Succeeded || noReplay.Effects("mail:order-9:confirmation") != 1 {
		t.Errorf("after Reconcile: %+v", rec)
	}

	// A replaying provider that keeps keys for an hour: a retry later than
	// that goes to reconciliation; the provider never saw the key (the
	// call timed out before reaching it), so the call is made again.
	p := NewFakeProvider(true)
	pay := e.keys(keys.Contract{Provider: "payments", Retention: time.Hour, Replays: true})
	const key = "payment:order-10:attempt-1"
	e.stage(pay, key, "9 EUR")
	p.SetDown(true)
	if _, err := pay.Call(e.Ctx, key, p.Call); !errors.Is(err, keys.ErrOutcomeUnknown) {
		t.Fatalf("Call while down: %v, want ErrOutcomeUnknown", err)
	}
	p.SetDown(false)
	e.clock.Advance(2 * time.Hour)
	if _, err := pay.Call(e.Ctx, key, p.Call); !errors.Is(err, keys.ErrReconcile) || p.Calls(key) != 0 {
		t.Errorf("retry after the provider's retention: %v (%d calls); want ErrReconcile and no call", err, p.Calls(key))
	}
	if n, err := pay.Reconcile(e.Ctx, p.Reconcile); n != 1 || err != nil {
		t.Errorf("Reconcile: %d, %v", n, err)
	}
	if rec, _, _ := pay.Get(e.Ctx, key); rec.State != keys.Staged || !rec.FirstCallAt.IsZero() {
		t.Errorf("reconciled as never seen: %+v", rec)
	}
	if n, err := pay.CallStaged(e.Ctx, p.Call, 0); n != 1 || err != nil || p.Effects(key) != 1 {
		t.Errorf("CallStaged after reconciliation: %d, %v, %d effects", n, err, p.Effects(key))
	}
	if u, _ := pay.Unresolved(e.Ctx, 0); len(u) != 0 {
		t.Errorf("unresolved left: %+v", u)
	}
}
