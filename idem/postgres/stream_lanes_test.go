package postgres

import (
	"context"
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
