package driver

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Poller runs a subscription's receive calls (long polls, pulls) for its
// ReceiveBatch, so that a call whose caller gave up (a context canceled
// while it waits) still runs to its end. Such a call may already have
// taken messages, which the broker then hides from every consumer until
// their lock expires; the Poller keeps what it brought for the next
// Receive instead. A driver's ReceiveBatch calls Receive, its Close calls
// Close and releases what Close returns. Its methods are safe for
// concurrent use.
type Poller[T any] struct {
	poll  func(ctx context.Context, n int) ([]T, error)
	fresh time.Duration

	bg   context.Context // ends the polls at Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	inflight *pollCall[T]
	stash    []polled[T] // brought by a poll, not yet handed out
	closed   bool
}

type pollCall[T any] struct {
	done chan struct{}
	msgs []T
	err  error
	at   time.Time
}

type polled[T any] struct {
	msg T
	at  time.Time // when its poll returned: the broker's lock runs from about then
}

// NewPoller returns a Poller whose polls call poll with a context that
// ends at Close and the most messages wanted. Calls of poll do not
// overlap: one starts after the previous one returned. poll returns no
// messages and a nil error for a poll that found none. A message waits
// for a Receive at most fresh after its poll returned (zero: without
// limit); an older one is dropped, as the broker delivers it again once
// its lock expires and a handler would have little of it left.
func NewPoller[T any](poll func(ctx context.Context, n int) ([]T, error), fresh time.Duration) *Poller[T] {
	p := &Poller[T]{poll: poll, fresh: fresh}
	p.bg, p.stop = context.WithCancel(context.Background())
	return p
}

var errPollerClosed = &Error{Op: "receive", Code: Closed, Err: errors.New("subscription is closed")}

// Receive returns up to n messages: those a poll brought earlier, or
// those of the poll in flight (started if there is none), which it waits
// for until ctx ends. A poll that brought nothing ends the call with no
// messages; a poll's error is returned once. After Close it returns an
// error matching ErrClosed.
func (p *Poller[T]) Receive(ctx context.Context, n int) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errPollerClosed
		}
		if msgs := p.take(n); len(msgs) > 0 {
			p.mu.Unlock()
			return msgs, nil
		}
		c := p.inflight
		if c == nil {
			c = p.start(n)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
		}
		p.mu.Lock()
		if err := p.collect(c); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		msgs := p.take(n)
		p.mu.Unlock()
		if len(msgs) > 0 || len(c.msgs) == 0 {
			return msgs, nil
		}
		// Everything the poll brought was too old: poll again.
	}
}

// start begins a poll; p.mu is held.
func (p *Poller[T]) start(n int) *pollCall[T] {
	c := &pollCall[T]{done: make(chan struct{})}
	p.inflight = c
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(c.done)
		c.msgs, c.err = p.poll(p.bg, n)
		c.at = time.Now()
	}()
	return c
}

// collect moves a finished poll's messages into the stash and returns its
// error, the first time only; p.mu is held.
func (p *Poller[T]) collect(c *pollCall[T]) error {
	if p.inflight != c {
		return nil
	}
	p.inflight = nil
	if c.err != nil {
		return c.err
	}
	for _, m := range c.msgs {
		p.stash = append(p.stash, polled[T]{msg: m, at: c.at})
	}
	return nil
}

// take hands out up to n stashed messages, dropping stale ones; p.mu is
// held.
func (p *Poller[T]) take(n int) []T {
	var out []T
	for len(p.stash) > 0 && len(out) < n {
		s := p.stash[0]
		p.stash = p.stash[1:]
		if p.fresh > 0 && time.Since(s.at) > p.fresh {
			continue
		}
		out = append(out, s.msg)
	}
	return out
}

// Close stops Receive, waits at most wait for the poll in flight, then
// ends it, and returns the messages no Receive took, for the driver to
// make available again. Closing twice returns nothing the second time.
func (p *Poller[T]) Close(wait time.Duration) []T {
	p.mu.Lock()
	p.closed = true
	c := p.inflight
	p.mu.Unlock()
	if c != nil {
		t := time.NewTimer(wait)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
	p.stop()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if c != nil {
		_ = p.collect(c)
	}
	var left []T
	for _, s := range p.stash {
		left = append(left, s.msg)
	}
	p.stash = nil
	return left
}
