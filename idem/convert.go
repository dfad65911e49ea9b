package idem

import (
	"context"
	"time"

	"github.com/wary-go/wary/idem/store"
)

// Conversions between the types of this package and the stores' (package
// idem/store), at the boundary between the two. The struct types whose
// fields are all of basic types convert directly (Parked(p)).

func keyRecord(r store.KeyRecord) KeyRecord {
	return KeyRecord{Provider: r.Provider, Key: r.Key, Intent: r.Intent, State: KeyState(r.State), Result: r.Result,
		Error: r.Error, Attempts: r.Attempts, CreatedAt: r.CreatedAt, FirstCallAt: r.FirstCallAt,
		LastCallAt: r.LastCallAt, LeaseUntil: r.LeaseUntil, DoneAt: r.DoneAt}
}

func keyRecords(rs []store.KeyRecord) []KeyRecord {
	out := make([]KeyRecord, len(rs))
	for i, r := range rs {
		out[i] = keyRecord(r)
	}
	return out
}

func (o KeyOutcome) store() store.KeyOutcome {
	return store.KeyOutcome{State: store.KeyState(o.State), Result: o.Result, Error: o.Error}
}

func outboxRow(r store.OutboxRow) OutboxRow {
	return OutboxRow{OutboxMessage: OutboxMessage(r.OutboxMessage), RowID: r.RowID, Sequence: r.Sequence,
		State: OutboxState(r.State), CreatedAt: r.CreatedAt, Attempts: r.Attempts, NextAttempt: r.NextAttempt,
		LastError: r.LastError, SentAt: r.SentAt}
}

func outboxRows(rs []store.OutboxRow) []OutboxRow {
	out := make([]OutboxRow, len(rs))
	for i, r := range rs {
		out[i] = outboxRow(r)
	}
	return out
}

func parkedList(ps []store.Parked) []Parked {
	out := make([]Parked, len(ps))
	for i, p := range ps {
		out[i] = Parked(p)
	}
	return out
}

func versionCheck(c store.VersionCheck) VersionCheck {
	return VersionCheck{Result: VersionResult(c.Result), Current: c.Current}
}

// keyStore is a store's KeyStore in this package's types.
type keyStore[Tx any] struct{ s store.KeyStore[Tx] }

func (k keyStore[Tx]) StageKey(ctx context.Context, tx Tx, provider, key string, intent []byte, at time.Time) (KeyRecord, bool, error) {
	r, created, err := k.s.StageKey(ctx, tx, provider, key, intent, at)
	return keyRecord(r), created, err
}

func (k keyStore[Tx]) GetKey(ctx context.Context, provider, key string) (KeyRecord, bool, error) {
	r, ok, err := k.s.GetKey(ctx, provider, key)
	return keyRecord(r), ok, err
}

func (k keyStore[Tx]) StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error) {
	return k.s.StartKeyCall(ctx, provider, key, attempts, at, leaseUntil)
}

func (k keyStore[Tx]) FinishKeyCall(ctx context.Context, provider, key string, attempts int, o KeyOutcome, at time.Time) (bool, error) {
	return k.s.FinishKeyCall(ctx, provider, key, attempts, o.store(), at)
}

func (k keyStore[Tx]) ListKeys(ctx context.Context, f store.KeyFilter) ([]KeyRecord, error) {
	rs, err := k.s.ListKeys(ctx, f)
	return keyRecords(rs), err
}

func (k keyStore[Tx]) PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error) {
	return k.s.PurgeKeys(ctx, provider, before, limit)
}
