package keys

// An in-memory fake of the store seam below a Caller (keyStore), as
// gocloud tests pubsub against a fake driver: records in a map, with the
// conditions of the SQL statements (idem/internal/sqlcore/keys.go) on
// state and attempts, a transaction type whose stagings show at Commit,
// and fault switches. The SQL itself is checked by the store suites
// (idem/internal/idemtest).

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
)

var _ keyStore[*keyTx] = (*fakeKeys)(nil)

// keyTx is a transaction of the fake store: its stagings are kept at
// Commit and dropped at Rollback.
type keyTx struct {
	s      *fakeKeys
	staged []Record
	done   bool
}

func (tx *keyTx) Commit() {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	tx.done = true
	for _, r := range tx.staged {
		id := [2]string{r.Provider, r.Key}
		if _, ok := tx.s.recs[id]; !ok { // ON CONFLICT DO NOTHING
			tx.s.recs[id] = r
		}
	}
}

func (tx *keyTx) Rollback() {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	tx.done, tx.staged = true, nil
}

// fakeKeys is the in-memory store.
type fakeKeys struct {
	t testing.TB

	mu   sync.Mutex
	recs map[[2]string]Record
	// Faults, returned by the method of their name.
	stageErr, getErr, startErr, finishErr, listErr, purgeErr error
	// lostStart makes StartKeyCall report that another caller started
	// the call first.
	lostStart bool
	starts    int // StartKeyCall calls
	purges    []int
}

func newFakeKeys(t testing.TB) *fakeKeys {
	return &fakeKeys{t: t, recs: map[[2]string]Record{}}
}

// Driver implements seam.Provider.
func (s *fakeKeys) Driver() seam.Driver[*keyTx] { return seam.NewDriver[*keyTx](s) }

func (s *fakeKeys) begin() *keyTx { return &keyTx{s: s} }

// set changes the store under its lock.
func (s *fakeKeys) set(f func(s *fakeKeys)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// rec returns the stored record of provider's key.
func (s *fakeKeys) rec(provider, key string) Record {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[[2]string{provider, key}]
	if !ok {
		s.t.Fatalf("fake: no key %s/%s", provider, key)
	}
	return r
}

// StageKey implements keyStore.
func (s *fakeKeys) StageKey(_ context.Context, tx *keyTx, provider, key string, intent []byte, at time.Time) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stageErr != nil {
		return Record{}, false, s.stageErr
	}
	if tx.done {
		s.t.Errorf("fake: StageKey in a finished transaction")
	}
	if r, ok := s.recs[[2]string{provider, key}]; ok {
		return r, false, nil
	}
	for _, r := range tx.staged {
		if r.Provider == provider && r.Key == key {
			return r, false, nil
		}
	}
	r := Record{Provider: provider, Key: key, Intent: slices.Clone(intent), State: Staged, CreatedAt: at}
	tx.staged = append(tx.staged, r)
	return r, true, nil
}

// GetKey implements keyStore.
func (s *fakeKeys) GetKey(_ context.Context, provider, key string) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getErr != nil {
		return Record{}, false, s.getErr
	}
	r, ok := s.recs[[2]string{provider, key}]
	return r, ok, nil
}

// StartKeyCall implements keyStore: from Staged, InFlight or Unknown, at
// the attempts the caller read.
func (s *fakeKeys) StartKeyCall(_ context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	if s.startErr != nil {
		return false, s.startErr
	}
	id := [2]string{provider, key}
	r, ok := s.recs[id]
	if !ok || s.lostStart || r.Attempts != attempts || !slices.Contains([]State{Staged, InFlight, Unknown}, r.State) {
		return false, nil
	}
	r.State, r.Attempts, r.LastCallAt, r.LeaseUntil = InFlight, r.Attempts+1, at, leaseUntil
	if r.FirstCallAt.IsZero() {
		r.FirstCallAt = at
	}
	s.recs[id] = r
	return true, nil
}

// FinishKeyCall implements keyStore: from InFlight or Unknown, at the
// attempts the caller started.
func (s *fakeKeys) FinishKeyCall(_ context.Context, provider, key string, attempts int, o Outcome, at time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finishErr != nil {
		return false, s.finishErr
	}
	id := [2]string{provider, key}
	r, ok := s.recs[id]
	if !ok || r.Attempts != attempts || r.State != InFlight && r.State != Unknown {
		return false, nil
	}
	switch o.State {
	case Staged: // the provider never saw it: as if never called
		r.State, r.FirstCallAt, r.LeaseUntil, r.Error = Staged, time.Time{}, time.Time{}, o.Error
	case Succeeded, Failed:
		r.State, r.Result, r.Error, r.DoneAt, r.LeaseUntil = o.State, slices.Clone(o.Result), o.Error, at, time.Time{}
		if r.Result == nil {
			r.Result = []byte{}
		}
	case Unknown:
		r.State, r.Error, r.LeaseUntil = Unknown, o.Error, time.Time{}
	default:
		s.t.Errorf("fake: FinishKeyCall with outcome %s", o.State)
		return false, nil
	}
	s.recs[id] = r
	return true, nil
}

// ListKeys implements keyStore: oldest first, then by key.
func (s *fakeKeys) ListKeys(_ context.Context, f Filter) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listErr != nil {
		return nil, s.listErr
	}
	var out []Record
	for _, r := range s.recs {
		if r.Provider != f.Provider || len(f.States) > 0 && !slices.Contains(f.States, r.State) ||
			f.Unresolved && !(r.State == Unknown || r.State == InFlight && !r.LeaseUntil.After(f.At)) {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// PurgeKeys implements keyStore.
func (s *fakeKeys) PurgeKeys(_ context.Context, provider string, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.purgeErr != nil {
		return 0, s.purgeErr
	}
	n := 0
	for id, r := range s.recs {
		if n < limit && r.Provider == provider && (r.State == Succeeded || r.State == Failed) && r.DoneAt.Before(before) {
			delete(s.recs, id)
			n++
		}
	}
	s.purges = append(s.purges, n)
	return n, nil
}
