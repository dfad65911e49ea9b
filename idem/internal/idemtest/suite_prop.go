package idemtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// testProperty: events of several aggregates, shuffled, duplicated (same
// ID) and replayed stale (new ID, old version), go through a versioned
// inbox whose broker redelivers nacked copies in random order. Once the
// queue is drained and the park replayed, every aggregate's state equals
// its events applied in order, every parked message was replayed, and late
// stale replays change nothing.
func testProperty[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	iter := 0
	rapid.Check(t, func(rt *rapid.T) {
		iter++
		ctx := t.Context()
		var msgs []*broker.Message
		want := map[string]string{}
		nAgg := rapid.IntRange(1, 4).Draw(rt, "aggregates")
		for a := range nAgg {
			agg := fmt.Sprintf("i%d-a%d", iter, a)
			n := rapid.IntRange(1, 6).Draw(rt, "events")
			var states []string
			for v := 1; v <= n; v++ {
				body := rapid.StringMatching(`[a-z]{1,3}`).Draw(rt, "body")
				states = append(states, body)
				msgs = append(msgs, Msg(fmt.Sprintf("%s-v%d", agg, v), body, agg, int64(v)))
			}
			want[agg] = strings.Join(states, ",")
		}
		originals := len(msgs)
		for i := range rapid.IntRange(0, originals).Draw(rt, "copies") {
			m := *msgs[rapid.IntRange(0, originals-1).Draw(rt, "copy of")]
			if rapid.Bool().Draw(rt, "stale replay (new ID)") {
				m.ID = fmt.Sprintf("%s-replay%d", m.ID, i)
			}
			msgs = append(msgs, &m)
		}
		in, err := idem.NewInbox(e.Store, fmt.Sprintf("prop%d", iter), Caps, Quiet(&idem.Options{MaxAttempts: 3, Versions: AggTable, Gaps: idem.GapsRetry}))
		if err != nil {
			rt.Fatal(err)
		}
		v := e.ApplyAgg()
		q := NewQueue(Caps)
		q.Push(msgs...)
		q.SetPick(func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") })
		sub := q.Subscription(nil)
		drain := func() {
			for q.Len() > 0 {
				d, err := q.Receive(ctx, sub)
				if err != nil {
					rt.Fatalf("receive: %v", err)
				}
				var pe *idem.ParkError
				if _, err := in.Handle(ctx, d, v); err != nil && !errors.As(err, &pe) {
					rt.Fatalf("Handle %s: %v", d.Message.ID, err)
				}
			}
		}
		drain()
		parked, err := in.Parked(ctx, idem.ParkedFilter{})
		if err != nil {
			rt.Fatal(err)
		}
		s := in.Stats()
		if int64(len(parked)) != s.Parked {
			rt.Fatalf("%d messages in the park, stats say %d were parked", len(parked), s.Parked)
		}
		if s.Gaps > 0 && s.Parked == 0 && s.Retried == 0 {
			rt.Fatalf("gaps seen but neither retried nor parked: %+v", s)
		}
		res, err := in.ReplayAll(ctx, v)
		if err != nil {
			rt.Fatalf("replay: %v", err)
		}
		replayed := 0
		for agg, r := range res {
			if r.Stopped != nil || r.Remaining != 0 {
				rt.Fatalf("replay of %s stopped: %+v", agg, r.Stopped)
			}
			replayed += r.Replayed
		}
		if replayed != len(parked) {
			rt.Fatalf("replayed %d of %d parked messages", replayed, len(parked))
		}
		if left, _ := in.Parked(ctx, idem.ParkedFilter{}); len(left) != 0 {
			rt.Fatalf("%d messages still parked after replay", len(left))
		}
		check := func(when string) {
			for agg, w := range want {
				var got string
				e.InTx(func(tx Tx) error {
					return e.DB.QueryRow(ctx, tx, `SELECT state FROM aggs WHERE id = $1`, agg).Scan(&got)
				})
				if got != w {
					rt.Fatalf("%s: aggregate %s: state %q, want %q (events in order)", when, agg, got, w)
				}
			}
		}
		check("after replay")
		// Late stale replays: acknowledged, never applied, never parked.
		for i, m := range msgs[:originals] {
			c := *m
			c.ID = fmt.Sprintf("%s-late%d", m.ID, i)
			q.Push(&c)
		}
		drain()
		check("after late stale replays")
		if p, _ := in.Parked(ctx, idem.ParkedFilter{}); len(p) != 0 {
			rt.Fatalf("stale replays parked: %d", len(p))
		}
	})
}
