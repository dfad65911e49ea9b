package keys

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
)

// hungFinishStore is a key store whose FinishKeyCall never answers: it
// waits for its context to end, and records the deadline it was given.
type hungFinishStore struct {
	keyStore[struct{}] // the methods the test does not call
	deadline           time.Time
	bounded            bool
}

func (s *hungFinishStore) Driver() seam.Driver[struct{}] { return seam.NewDriver[struct{}](s) }

func (s *hungFinishStore) GetKey(_ context.Context, provider, key string) (Record, bool, error) {
	return Record{Provider: provider, Key: key, State: Staged}, true, nil
}

func (s *hungFinishStore) StartKeyCall(context.Context, string, string, int, time.Time, time.Time) (bool, error) {
	return true, nil
}

func (s *hungFinishStore) FinishKeyCall(ctx context.Context, _, _ string, _ int, _ Outcome, _ time.Time) (bool, error) {
	s.deadline, s.bounded = ctx.Deadline()
	<-ctx.Done()
	return false, ctx.Err()
}

// The outcome of a call made is recorded although the caller's context
// ended during the call, and a store that never answers fails the record
// at seam.DetachTimeout with context.DeadlineExceeded instead of holding
// Call for ever.
func TestCallRecordsOutcomeWithinDetachTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &hungFinishStore{}
		k, err := New(st, Contract{Provider: "psp"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var done time.Time
		_, err = k.Call(ctx, "k1", func(context.Context, string, []byte) ([]byte, error) {
			cancel() // the caller gives up while the call is made
			done = time.Now()
			return []byte("ok"), nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Call = %v, want an error matching context.DeadlineExceeded", err)
		}
		if want := done.Add(seam.DetachTimeout); !st.bounded || !st.deadline.Equal(want) {
			t.Errorf("FinishKeyCall's deadline %v (set %v), want %v (seam.DetachTimeout after the call)", st.deadline, st.bounded, want)
		}
	})
}
