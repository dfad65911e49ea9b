package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// capsSub is a stubSub declaring a lock, extendable or not.
type capsSub struct {
	stubSub
	lock       time.Duration
	extendable bool
}

func (s *capsSub) Capabilities() capability.Subscription {
	return capability.Subscription{LockTimeout: s.lock, LockExtendable: s.extendable}
}

// TestRunChecksTheLock: Run refuses a subscription whose broker locks
// nothing (capability.LockNone) before it receives anything, warns when the lock
// expires and cannot be extended, and says nothing of a lock it renews or
// of deliveries held until settled.
func TestRunChecksTheLock(t *testing.T) {
	for _, c := range []struct {
		name       string
		lock       time.Duration
		extendable bool
		refused    bool
		warned     bool
	}{
		{"no lock", capability.LockNone, false, true, false},
		{"lock not extendable", time.Minute, false, false, true},
		{"lock extendable", time.Minute, true, false, false},
		{"held until settled", 0, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			d := &capsSub{stubSub: stubSub{msgs: []*driver.Message{{ID: "m1", AckID: 1}}, acked: make(chan driver.AckID, 1)}, lock: c.lock, extendable: c.extendable}
			sub := NewSubscription(d, &SubscriptionOptions{Telemetry: Telemetry{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
			defer sub.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			handled := false
			err := sub.Run(ctx, func(context.Context, *Delivery) error {
				handled = true
				cancel()
				return nil
			}, nil)
			if refused := errors.Is(err, ErrInvalid); refused != c.refused || (err != nil && !refused) {
				t.Fatalf("Run returned %v, want refused %t", err, c.refused)
			}
			if handled == c.refused {
				t.Fatalf("handler called: %t, want %t", handled, !c.refused)
			}
			if warned := strings.Contains(logs.String(), "cannot be extended"); warned != c.warned {
				t.Fatalf("warned: %t, want %t; log:\n%s", warned, c.warned, logs.String())
			}
		})
	}
}
