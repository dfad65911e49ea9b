package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// flagStore is a wake flag in memory that records the calls made to it.
type flagStore struct {
	set      bool
	inFlight bool // a producer that did not notify may still commit
	fail     error
	calls    []string
}

func (f *flagStore) IdleOutbox(context.Context, string, time.Duration) (bool, error) {
	f.calls = append(f.calls, "idle")
	if f.fail != nil || f.inFlight {
		return false, f.fail
	}
	f.set = true
	return true, nil
}

func (f *flagStore) RenewIdleOutbox(context.Context, string, time.Duration) (bool, error) {
	f.calls = append(f.calls, "renew")
	return f.set, f.fail
}

func (f *flagStore) BusyOutbox(context.Context, string) error {
	f.calls = append(f.calls, "busy")
	if f.fail == nil {
		f.set = false
	}
	return f.fail
}

func (f *flagStore) ListenOutbox(context.Context, func()) error { return nil }

// TestWakePolicy: the relay's wake-up on PostgreSQL, call by call. A new
// relay sets its flag at its first empty claim and claims once more; a
// waiting relay renews it; a swept flag is set again; work clears it; a
// relay that had work polls busyPoll for idleAfter empty claims before it
// asks for notifications again; a producer in flight keeps it polling; a
// failed clear leaves the flag counted as set.
func TestWakePolicy(t *testing.T) {
	ctx := t.Context()
	f := &flagStore{}
	w := newWake(f, "r", time.Minute)
	idle := func(want time.Duration, calls ...string) {
		t.Helper()
		f.calls = nil
		got, err := w.Idle(ctx)
		if err != nil || got != want || !slices.Equal(f.calls, calls) {
			t.Fatalf("Idle: %v, %v, calls %v; want %v, calls %v", got, err, f.calls, want, calls)
		}
	}
	idle(-1, "idle") // no work yet: set the flag at once, then claim once more
	idle(0, "renew")
	f.set = false // swept by another relay: set again
	idle(-1, "renew", "idle")
	if err := w.Busy(ctx); err != nil || f.set {
		t.Fatalf("Busy: %v, flag set %v", err, f.set)
	}
	f.calls = nil
	if err := w.Busy(ctx); err != nil || len(f.calls) != 0 {
		t.Fatalf("Busy with no flag set: %v, calls %v; want none", err, f.calls)
	}
	for range idleAfter - 1 {
		idle(busyPoll) // had work: poll, ask nothing of the store
	}
	f.inFlight = true
	idle(busyPoll, "idle") // a producer that did not notify may commit: poll
	f.inFlight = false
	idle(-1, "idle")
	f.fail = errors.New("down")
	if err := w.Busy(ctx); err == nil {
		t.Fatal("Busy hid the store's error")
	}
	f.calls = nil
	if _, err := w.Idle(ctx); err == nil || !slices.Equal(f.calls, []string{"renew"}) {
		t.Fatalf("after a failed clear: %v, calls %v; want the flag renewed as still set", err, f.calls)
	}
}
