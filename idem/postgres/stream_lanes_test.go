package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// settleLog is a logStream that records the rows of each Settle.
type settleLog struct {
	brokenStream
	mu    sync.Mutex
	calls [][]int64
}

func (s *settleLog) Settle(_ context.Context, sent []int64, _ []seam.OutboxFailure, _ []int64, _ time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, slices.Clone(sent))
	return 0, nil
}

// TestDeleterLingers: windows queued while the deleter waits for more
// (a trickle: fewer than lingerRows rows) share one DELETE, and a stop
// ends the wait at once: they are deleted and land before the deleter
// returns.
func TestDeleterLingers(t *testing.T) {
	st := &settleLog{}
	l := &streamLoop{st: st, finished: make(chan *window, 8)}
	d := newDeleter(l)
	d.linger = time.Hour // only the stop ends it
	done := make(chan struct{})
	go func() { defer close(done); d.run(t.Context()) }()
	add := func(id int64) { d.add(&window{rows: []outbox.Row{{RowID: id}}}, []int64{id}) }
	add(1)
	// The deleter took the wake-up: it waits now, the first row queued.
	deadline := time.Now().Add(30 * time.Second)
	for len(d.wake) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deleter did not wake within 30 s")
		}
		runtime.Gosched()
	}
	for id := range int64(4) {
		add(id + 2)
	}
	d.stop()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the deleter did not return within 30 s of its stop")
	}
	if len(l.finished) != 5 {
		t.Errorf("%d windows landed, want 5", len(l.finished))
	}
	if want := [][]int64{{1, 2, 3, 4, 5}}; !slices.EqualFunc(st.calls, want, slices.Equal) {
		t.Errorf("DELETEs of %v, want one of %v", st.calls, want)
	}
}

// TestDeleterNoLingerForMany: woken with lingerRows rows queued or more,
// the deleter deletes them at once, without waiting for more.
func TestDeleterNoLingerForMany(t *testing.T) {
	st := &settleLog{}
	l := &streamLoop{st: st, finished: make(chan *window, 1)}
	d := newDeleter(l)
	d.linger = time.Hour
	ids := make([]int64, lingerRows)
	rows := make([]outbox.Row, lingerRows)
	for i := range ids {
		ids[i], rows[i].RowID = int64(i+1), int64(i+1)
	}
	d.add(&window{rows: rows}, ids)
	done := make(chan struct{})
	go func() { defer close(done); d.run(t.Context()) }()
	defer func() { d.stop(); <-done }()
	select {
	case <-l.finished:
	case <-time.After(30 * time.Second):
		t.Fatal("a window of lingerRows rows did not land within 30 s")
	}
	if len(st.calls) != 1 || len(st.calls[0]) != lingerRows {
		t.Errorf("DELETEs of %d rows each, want one of %d", len(st.calls), lingerRows)
	}
}

// TestLaneOfIsFNV: laneOf deals aggregates to lanes by hash/fnv's 32-bit
// FNV-1a of their IDs.
func TestLaneOfIsFNV(t *testing.T) {
	l := &streamLoop{lanes: make([]lane, 7)}
	for _, a := range []string{"", "a", "agg-001", "order-42", "é/ü", strings.Repeat("x", 300)} {
		h := fnv.New32a()
		h.Write([]byte(a))
		if l.laneOf(a) != &l.lanes[h.Sum32()%7] {
			t.Errorf("laneOf(%q) is not lane %d", a, h.Sum32()%7)
		}
	}
}

// TestDispatchHeldRows: under a trickle, the rows of an aggregate whose
// window is being published wait in order while the others go, rows
// that come meanwhile are looked at (and go) without the held ones, and
// once that window's Publish returned the held rows go, in order, with
// the aggregate's rows that came after them (never before them).
func TestDispatchHeldRows(t *testing.T) {
	s := &streamSource{c: seam.SourceConfig{BatchSize: 10}, ready: make(chan *seam.Batch[outbox.Row], 8)}
	l := &streamLoop{s: s, lanes: make([]lane, 1), clean: true,
		finished: make(chan *window, 8), sent: make(chan *window, 8)}
	var wg sync.WaitGroup
	defer wg.Wait()
	ln := &l.lanes[0]
	next := func() []string { // the next batch handed out, by message ID
		t.Helper()
		select {
		case b := <-s.ready:
			var ids []string
			for _, r := range b.Rows {
				ids = append(ids, r.ID)
			}
			return ids
		case <-time.After(30 * time.Second):
			t.Fatal("no batch handed out within 30 s")
			return nil
		}
	}
	row := func(id int64, agg string) outbox.Row {
		return outbox.Row{RowID: id, Message: outbox.Message{ID: fmt.Sprintf("%s-%d", agg, id), AggregateID: agg}}
	}
	l.receive(streamEvent{Pos: 1, Rows: []outbox.Row{row(1, "a")}})
	l.dispatch(t.Context(), ln, &wg)
	if got := next(); !slices.Equal(got, []string{"a-1"}) {
		t.Fatalf("first window %v, want [a-1]", got)
	}
	aWindow := ln.flight[0]
	l.receive(streamEvent{Pos: 2, Rows: []outbox.Row{row(2, "a"), row(3, "b"), row(4, "a")}})
	l.dispatch(t.Context(), ln, &wg)
	if got := next(); !slices.Equal(got, []string{"b-3"}) {
		t.Fatalf("second window %v, want [b-3] (a's rows wait for a-1's publish)", got)
	}
	l.dispatch(t.Context(), ln, &wg) // nothing free: a's rows held
	l.receive(streamEvent{Pos: 3, Rows: []outbox.Row{row(5, "c")}})
	l.dispatch(t.Context(), ln, &wg)
	if got := next(); !slices.Equal(got, []string{"c-5"}) {
		t.Fatalf("third window %v, want [c-5]", got)
	}
	if len(ln.pend) != 2 || ln.pend[0].row.RowID != 2 || ln.pend[1].row.RowID != 4 {
		t.Fatalf("pending rows %v, want a-2 and a-4 in order", ln.pend)
	}
	// a-1's Publish returns, and a-6 comes before the loop hears of it: it
	// goes after a-2 and a-4, not before them.
	close(aWindow.published)
	l.receive(streamEvent{Pos: 4, Rows: []outbox.Row{row(6, "a")}})
	l.dispatch(t.Context(), ln, &wg)
	if got := next(); !slices.Equal(got, []string{"a-2", "a-4", "a-6"}) {
		t.Fatalf("fourth window %v, want [a-2 a-4 a-6]", got)
	}
	if len(ln.pend) != 0 || ln.held != 0 {
		t.Errorf("%d rows pending, %d held after every row went", len(ln.pend), ln.held)
	}
}
