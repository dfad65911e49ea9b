package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// commitDeadlines hands out the deadlines that bound an inbox's commits
// and rollbacks (Options.CommitTimeout). A context.WithTimeout per commit
// starts and stops a runtime timer per message, and about every other one
// wakes the netpoller (a futex): a measurable part of the client's CPU
// for a one-row transaction. Instead, the commits that begin within one
// sixteenth of the timeout of each other share one deadline, set the
// timeout after the first of them began: each is bounded by at most the
// timeout and at least 15/16 of it.
type commitDeadlines struct {
	timeout time.Duration
	cur     atomic.Pointer[sharedDeadline]
	mu      sync.Mutex // held to replace cur
}

// sharedDeadline is a context that ends at its deadline, handed out to the
// commits that begin before until.
type sharedDeadline struct {
	ctx   context.Context
	until time.Time
	// cancel is never called before the deadline (commits that began
	// before until may run up to it), which ends ctx and releases it.
	cancel context.CancelFunc
}

// bound returns ctx without its cancellation, bounded by a deadline at
// most timeout away and at least 15/16 of it.
func (c *commitDeadlines) bound(ctx context.Context) context.Context {
	return &boundCtx{Context: context.WithoutCancel(ctx), bound: c.shared()}
}

func (c *commitDeadlines) shared() context.Context {
	now := time.Now()
	if d := c.cur.Load(); d != nil && now.Before(d.until) {
		return d.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.cur.Load(); d != nil && now.Before(d.until) {
		return d.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(c.timeout))
	c.cur.Store(&sharedDeadline{ctx: ctx, until: now.Add(c.timeout / 16), cancel: cancel})
	return ctx
}

// boundCtx has the values of one context (the caller's, without its
// cancellation) and the deadline and cancellation of another (a shared
// deadline).
type boundCtx struct {
	context.Context // for the values
	bound           context.Context
}

func (c *boundCtx) Deadline() (time.Time, bool) { return c.bound.Deadline() }
func (c *boundCtx) Done() <-chan struct{}       { return c.bound.Done() }
func (c *boundCtx) Err() error                  { return c.bound.Err() }

// Value is the caller's value for key, else the shared deadline's: that
// answers the context package's own key with the deadline's cancelCtx, so
// that context.AfterFunc on c (pgx watches each query's context with it)
// and the contexts derived from c hang on the deadline's list of children
// rather than start a goroutine each.
func (c *boundCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.bound.Value(key)
}
