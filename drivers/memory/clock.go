package memory

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Clock is the time source of a Broker: lock expiry, nack delays, dedup
// windows and retention all read it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FakeClock is a Clock that moves only when Advance is called, for
// deterministic tests. It is safe for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	changed chan struct{} // closed and replaced when a waiter is added
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewFakeClock returns a FakeClock that reads start until advanced.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once Advance has
// moved the clock d or more past the current time. A d of zero or less
// fires at once.
func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.afterLocked(c.now.Add(d))
}

// afterAt is After with an absolute deadline, so that a Broker does not
// lose a wake-up to an Advance between reading Now and calling After, and
// with a stop function that withdraws the waiter.
func (c *FakeClock) afterAt(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.afterLocked(t)
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.waiters = slices.DeleteFunc(c.waiters, func(w fakeWaiter) bool { return w.ch == ch })
	}
}

func (c *FakeClock) afterLocked(t time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: t, ch: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock d forward and fires every After channel that has
// come due, earliest first.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	var due []fakeWaiter
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			keep = append(keep, w)
		} else {
			due = append(due, w)
		}
	}
	clear(c.waiters[len(keep):])
	c.waiters = keep
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, w := range due {
		w.ch <- c.now
	}
}

// Waiters returns how many After channels are waiting for the clock to
// advance. A receiver of a Broker on this clock that waits for a lock
// expiry or a nack delay counts as one while it waits (and no longer once
// it returns), so tests can use WaitForWaiters to know that a receiver is
// blocked before they advance the clock.
func (c *FakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// WaitForWaiters blocks until at least n After channels are pending, or
// done is closed (it then returns false). It waits on a signal, not by
// polling.
func (c *FakeClock) WaitForWaiters(n int, done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		if len(c.waiters) >= n {
			c.mu.Unlock()
			return true
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// afterAt waits until t on any clock, using the exact deadline and a
// stoppable timer where the clock offers them.
func afterAt(c Clock, t time.Time) (<-chan time.Time, func()) {
	switch c := c.(type) {
	case *FakeClock:
		return c.afterAt(t)
	case realClock:
		tm := time.NewTimer(time.Until(t))
		return tm.C, func() { tm.Stop() }
	}
	return c.After(t.Sub(c.Now())), func() {}
}
