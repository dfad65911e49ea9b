// Package signal holds the small synchronisation helpers the relay and
// its sources share.
package signal

import (
	"context"
	"sync"
	"time"
)

// Broadcast wakes every goroutine waiting on it each time it fires. The
// zero value is ready to use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next Fire (nil: nobody waits yet)
}

// Wait returns a channel that the next Fire closes.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Fire closes the channel of every Wait before it.
func (b *Broadcast) Fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// Sleep waits d or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
