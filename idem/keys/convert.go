package keys

import (
	"context"
	"time"

	"github.com/wary-go/wary/idem/store"
)

// Conversions between this package's types and the stores' (idem/store).

func keyRecord(r store.KeyRecord) Record {
	return Record{Provider: r.Provider, Key: r.Key, Intent: r.Intent, State: State(r.State), Result: r.Result,
		Error: r.Error, Attempts: r.Attempts, CreatedAt: r.CreatedAt, FirstCallAt: r.FirstCallAt,
		LastCallAt: r.LastCallAt, LeaseUntil: r.LeaseUntil, DoneAt: r.DoneAt}
}

func keyRecords(rs []store.KeyRecord) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = keyRecord(r)
	}
	return out
}

func (o Outcome) store() store.KeyOutcome {
	return store.KeyOutcome{State: store.KeyState(o.State), Result: o.Result, Error: o.Error}
}

// keyStore is a store's KeyStore in this package's types.
type keyStore[Tx any] struct{ s store.KeyStore[Tx] }

func (k keyStore[Tx]) StageKey(ctx context.Context, tx Tx, provider, key string, intent []byte, at time.Time) (Record, bool, error) {
	r, created, err := k.s.StageKey(ctx, tx, provider, key, intent, at)
	return keyRecord(r), created, err
}

func (k keyStore[Tx]) GetKey(ctx context.Context, provider, key string) (Record, bool, error) {
	r, ok, err := k.s.GetKey(ctx, provider, key)
	return keyRecord(r), ok, err
}

func (k keyStore[Tx]) StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error) {
	return k.s.StartKeyCall(ctx, provider, key, attempts, at, leaseUntil)
}

func (k keyStore[Tx]) FinishKeyCall(ctx context.Context, provider, key string, attempts int, o Outcome, at time.Time) (bool, error) {
	return k.s.FinishKeyCall(ctx, provider, key, attempts, o.store(), at)
}

func (k keyStore[Tx]) ListKeys(ctx context.Context, f store.KeyFilter) ([]Record, error) {
	rs, err := k.s.ListKeys(ctx, f)
	return keyRecords(rs), err
}

func (k keyStore[Tx]) PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error) {
	return k.s.PurgeKeys(ctx, provider, before, limit)
}
