package driver_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/driver"
)

// TestPollerKeepsAbandonedPoll: a Receive whose context ends while its
// poll waits leaves the poll running; the next Receive gets what it
// brought, without polling again, up to the number it asks for, and the
// rest on the call after.
func TestPollerKeepsAbandonedPoll(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	polls := 0
	p := driver.NewPoller(func(ctx context.Context, n int) ([]int, error) {
		polls++
		if polls == 1 {
			close(started)
			<-release
			return []int{1, 2, 3}, nil
		}
		return nil, nil
	}, 0)
	defer p.Close(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	if msgs, err := p.Receive(ctx, 10); !errors.Is(err, context.Canceled) || msgs != nil {
		t.Fatalf("abandoned Receive = %v, %v; want nothing and context.Canceled", msgs, err)
	}
	close(release)
	msgs, err := p.Receive(context.Background(), 2)
	if err != nil || !slices.Equal(msgs, []int{1, 2}) {
		t.Fatalf("Receive after the abandoned poll = %v, %v; want [1 2]", msgs, err)
	}
	msgs, err = p.Receive(context.Background(), 2)
	if err != nil || !slices.Equal(msgs, []int{3}) {
		t.Fatalf("next Receive = %v, %v; want [3] from the stash", msgs, err)
	}
	if polls != 1 {
		t.Fatalf("%d polls, want 1", polls)
	}
}

// TestPollerErrorsAndStale: a poll's error is returned by the Receive
// that collects it; messages older than fresh are dropped and the
// Receive polls again; an empty poll ends the call with nothing.
func TestPollerErrorsAndStale(t *testing.T) {
	boom := errors.New("boom")
	results := []struct {
		msgs []string
		err  error
	}{{nil, boom}, {[]string{"a"}, nil}, {nil, nil}}
	polls := 0
	p := driver.NewPoller(func(ctx context.Context, n int) ([]string, error) {
		r := results[polls]
		polls++
		return r.msgs, r.err
	}, time.Nanosecond) // every message is stale when handed out
	defer p.Close(time.Second)
	if _, err := p.Receive(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("Receive = %v, want the poll's error", err)
	}
	msgs, err := p.Receive(context.Background(), 1)
	if err != nil || len(msgs) != 0 || polls != 3 {
		t.Fatalf("Receive = %v, %v after %d polls; want nothing after 3 (the stale message dropped, then an empty poll)", msgs, err, polls)
	}
}

// TestPollerClose: Close waits for the poll in flight and returns what no
// Receive took; Receive after Close matches ErrClosed.
func TestPollerClose(t *testing.T) {
	started := make(chan struct{})
	p := driver.NewPoller(func(ctx context.Context, n int) ([]int, error) {
		close(started)
		return []int{7, 8}, nil
	}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Receive(ctx, 1)
	}()
	<-started
	cancel()
	<-done
	// The Receive may have taken 7 (if the poll ended first) or nothing.
	left := p.Close(time.Second)
	if !slices.Equal(left, []int{7, 8}) && !slices.Equal(left, []int{8}) {
		t.Fatalf("Close returned %v, want the messages not handed out", left)
	}
	if _, err := p.Receive(context.Background(), 1); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Receive after Close = %v, want ErrClosed", err)
	}
	if left := p.Close(time.Second); left != nil {
		t.Fatalf("second Close returned %v", left)
	}
}
