package idemtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem"
)

// PoisonIDs are message IDs that break driver.ValidateID, as a foreign
// producer can still send them: a NUL byte, invalid UTF-8, a control
// character, one over driver.MaxIDLen and one over PostgreSQL's index
// row limit, one of only white space, and none at all.
var PoisonIDs = []string{"nul\x00id", "bad\xffutf8", "line\nbreak", strings.Repeat("l", driver.MaxIDLen+1), strings.Repeat("x", 3000), " \u00a0", ""}

// testPoisonID: a message whose ID cannot be claimed is settled for good,
// dead-lettered with the reason where the broker can and parked (under a
// stand-in ID) where it cannot; the good messages around it are applied,
// one by one and in a batch, and nothing is retried for ever.
func testPoisonID[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	for _, dlq := range []bool{true, false} {
		for _, batch := range []bool{false, true} {
			name := fmt.Sprintf("dlq=%v/batch=%v", dlq, batch)
			caps := Caps
			caps.DeadLetter = dlq
			consumer := fmt.Sprintf("poison-%v-%v", dlq, batch)
			in, err := idem.NewInbox(e.Store, consumer, caps, Quiet(&idem.Options{Batch: 2 * len(PoisonIDs)}))
			if err != nil {
				t.Fatal(err)
			}
			q := NewQueue(caps)
			sub := q.Subscription(nil)
			var good []string
			for i, id := range PoisonIDs {
				g := fmt.Sprintf("%s-good-%d", consumer, i)
				good = append(good, g)
				q.Push(Msg(g, "x", "", 0), &broker.Message{ID: id, Body: []byte("poison")})
			}
			want := idem.ResultDeadLettered
			if !dlq {
				want = idem.ResultParked
			}
			check := func(d *broker.Delivery, r idem.Result, err error) {
				t.Helper()
				if string(d.Message.Body) != "poison" {
					if r != idem.ResultApplied {
						t.Errorf("%s: good message %s: %v, %v", name, d.Message.ID, r, err)
					}
					return
				}
				if r != want || !errors.Is(err, idem.ErrInvalidID) && (dlq || err != nil) {
					t.Errorf("%s: poison ID %.20q: %v, %v; want %v", name, d.Message.ID, r, err, want)
				}
				if dlq && q.DeadLetters(d.Message.ID) != 1 {
					t.Errorf("%s: poison ID %.20q dead-lettered %d times", name, d.Message.ID, q.DeadLetters(d.Message.ID))
				}
				if q.Nacks(d.Message.ID) != 0 {
					t.Errorf("%s: poison ID %.20q nacked", name, d.Message.ID)
				}
			}
			ran := 0
			h := func(ctx context.Context, tx Tx, d *broker.Delivery) error { ran++; return e.Effect()(ctx, tx, d) }
			if batch {
				ds, err := sub.Receive(e.Ctx, 2*len(PoisonIDs))
				if err != nil {
					t.Fatal(err)
				}
				rs, errs := InGroup(t, in, ds, h)
				for i, d := range ds {
					check(d, rs[i], errs[i])
				}
			} else {
				for range 2 * len(PoisonIDs) {
					d := receive(t, q, sub)
					r, err := in.Handle(e.Ctx, d, h)
					check(d, r, err)
				}
			}
			if q.Len() != 0 || ran != len(good) {
				t.Errorf("%s: %d copies left, handler ran %d times; want 0 and %d", name, q.Len(), ran, len(good))
			}
			parked, err := in.Parked(e.Ctx, idem.ParkedFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if dlq && len(parked) != 0 || !dlq && len(parked) != len(PoisonIDs) {
				t.Errorf("%s: %d parked, want %d", name, len(parked), map[bool]int{true: 0, false: len(PoisonIDs)}[dlq])
			}
			for _, p := range parked {
				if !strings.HasPrefix(p.MessageID, "wary-") || string(p.Body) != "poison" || !strings.Contains(p.Reason, "invalid message ID") {
					t.Errorf("%s: parked %q (%q): reason %q", name, p.MessageID, p.Body, p.Reason)
				}
			}
		}
	}
	e.CheckEffects(goodIDs()...)
}

func goodIDs() []string {
	var ids []string
	for _, dlq := range []bool{true, false} {
		for _, batch := range []bool{false, true} {
			for i := range PoisonIDs {
				ids = append(ids, fmt.Sprintf("poison-%v-%v-good-%d", dlq, batch, i))
			}
		}
	}
	return ids
}
