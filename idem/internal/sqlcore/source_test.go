package sqlcore

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// startWake is a wake-up that starts listening only once the source's
// first claim found nothing, so that the claim loop first waits without
// listening; it then notifies once, as a wake-up does when it starts. It
// records the source's first call of Idle.
type startWake struct {
	claimed <-chan struct{} // closed by the first claim
	idled   chan struct{}   // closed by the first Idle
	once    sync.Once
}

func (w *startWake) Listen(ctx context.Context, notify func()) error {
	select {
	case <-w.claimed:
	case <-ctx.Done():
		return nil
	}
	notify()
	<-ctx.Done()
	return nil
}

func (w *startWake) Idle(context.Context) (time.Duration, error) {
	w.once.Do(func() { close(w.idled) })
	return 0, nil
}

func (w *startWake) Busy(context.Context) error { return nil }

type emptyBatch struct{}

func (emptyBatch) Rows() []outbox.Row { return nil }
func (emptyBatch) Complete(context.Context, []int64, []seam.OutboxFailure, time.Time) error {
	return nil
}
func (emptyBatch) Release(context.Context) error { return nil }
func (emptyBatch) Lost() context.Context         { return nil }

// TestPollSourceAsksWakeOnceListening: a claim loop that went to wait
// before the wake-up listened is woken by the wake-up's first
// notification, and from then on must see the source listening, so that
// it asks the wake-up (Idle) before it waits again. A loop that saw the
// source not yet listening would wait the whole poll interval without
// asking producers to notify it: rows committed meanwhile would wait for
// the next poll. Repeated, as the loop and the listener race.
func TestPollSourceAsksWakeOnceListening(t *testing.T) {
	o := &Outbox[any]{d: OutboxDialect{SkipLocked: true}}
	never := func() <-chan struct{} { return nil }
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		claimed := make(chan struct{})
		var first sync.Once
		w := &startWake{claimed: claimed, idled: make(chan struct{})}
		s := o.PollSource(seam.SourceConfig{Owner: "r", BatchSize: 10, PollInterval: time.Hour, Now: time.Now,
			Logger: slog.New(slog.DiscardHandler), Note: func(op string, err error) { t.Errorf("%s: %v", op, err) },
			Woken: never, Changed: never},
			PollOptions{Pipeline: 1, Wake: w, Claim: func(context.Context, Claim) (Batch, error) {
				first.Do(func() { close(claimed) })
				return emptyBatch{}, nil
			}})
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := s.Next(rctx, true); err != rctx.Err() {
				t.Errorf("Next: %v", err)
			}
		}()
		select {
		case <-w.idled:
		case <-ctx.Done():
			t.Fatalf("round %d: the claim loop waits the poll interval without asking the wake-up, though the source listens (state %+v)", i, s.State())
		}
		stop()
		<-done
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
}
