package sqlcore

// The idempotency keys live on the Outbox part of the stores too: both are
// the producer side of the safety net, added on top of Core.

import (
	"context"
	"fmt"
	"time"

	"github.com/wary-go/wary/idem/keys"
)

const keyCols = `provider, idem_key, intent, state, attempts, result, error, created_at, first_call_at, last_call_at,
	lease_until, done_at`

// StageKey implements the keys' part (keys' keyStore).
func (o *Outbox[Tx]) StageKey(ctx context.Context, tx Tx, provider, key string, intent []byte, at time.Time) (keys.Record, bool, error) {
	q := o.c.b.Q(tx)
	n, err := q.Exec(ctx, o.c.render(`INSERT INTO {{idempotency_keys}} (provider, idem_key, intent, state, created_at)
		VALUES ($1, $2, $3, 0, $4) ON CONFLICT (provider, idem_key) DO NOTHING`), provider, key, intent, o.c.d.Time(at))
	if err != nil {
		return keys.Record{}, false, err
	}
	rec, _, err := o.getKey(ctx, q, provider, key)
	return rec, n == 1, err
}

func (o *Outbox[Tx]) getKey(ctx context.Context, q Querier, provider, key string) (keys.Record, bool, error) {
	var r keys.Record
	err := scanKey(q.QueryRow(ctx, o.c.render(`SELECT `+keyCols+` FROM {{idempotency_keys}} WHERE provider = $1 AND idem_key = $2`), provider, key), &r)
	if o.c.d.IsNoRows(err) {
		return r, false, nil
	}
	return r, err == nil, err
}

func scanKey(s interface{ Scan(...any) error }, r *keys.Record) error {
	var state int
	err := s.Scan(&r.Provider, &r.Key, &r.Intent, &state, &r.Attempts, &r.Result, &r.Error, timeDest{&r.CreatedAt},
		nullTimeDest{&r.FirstCallAt}, nullTimeDest{&r.LastCallAt}, nullTimeDest{&r.LeaseUntil}, nullTimeDest{&r.DoneAt})
	r.State = keys.State(state)
	return err
}

// GetKey implements the keys' part (keys' keyStore).
func (o *Outbox[Tx]) GetKey(ctx context.Context, provider, key string) (rec keys.Record, ok bool, err error) {
	err = o.read(ctx, func(q Querier) error {
		rec, ok, err = o.getKey(ctx, q, provider, key)
		return err
	})
	return rec, ok, err
}

// StartKeyCall implements the keys' part (keys' keyStore).
func (o *Outbox[Tx]) StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error) {
	var n int64
	err := o.c.inTx(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, o.c.render(`UPDATE {{idempotency_keys}} SET state = 1, attempts = attempts + 1,
			first_call_at = COALESCE(first_call_at, $4), last_call_at = $4, lease_until = $5
			WHERE provider = $1 AND idem_key = $2 AND attempts = $3 AND state IN (0, 1, 4)`),
			provider, key, attempts, o.c.d.Time(at), o.c.d.Time(leaseUntil))
		return err
	})
	return n == 1, err
}

// FinishKeyCall implements the keys' part (keys' keyStore).
func (o *Outbox[Tx]) FinishKeyCall(ctx context.Context, provider, key string, attempts int, out keys.Outcome, at time.Time) (bool, error) {
	var q string
	args := []any{provider, key, attempts}
	switch out.State {
	case keys.Staged: // the provider never saw it: as if never called
		q = `UPDATE {{idempotency_keys}} SET state = 0, first_call_at = NULL, lease_until = NULL, error = $4`
		args = append(args, out.Error)
	case keys.Succeeded, keys.Failed:
		q = `UPDATE {{idempotency_keys}} SET state = $4, result = $5, error = $6, done_at = $7, lease_until = NULL`
		args = append(args, int(out.State), nonNil(out.Result), out.Error, o.c.d.Time(at))
	case keys.Unknown:
		q = `UPDATE {{idempotency_keys}} SET state = 4, error = $4, lease_until = NULL`
		args = append(args, out.Error)
	default:
		return false, fmt.Errorf("idem: cannot record outcome %s", out.State)
	}
	q += ` WHERE provider = $1 AND idem_key = $2 AND attempts = $3 AND state IN (1, 4)`
	var n int64
	err := o.c.inTx(ctx, func(qr Querier) error {
		var err error
		n, err = qr.Exec(ctx, o.c.render(q), args...)
		return err
	})
	return n == 1, err
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ListKeys implements the keys' part (keys' keyStore).
func (o *Outbox[Tx]) ListKeys(ctx context.Context, f keys.Filter) ([]keys.Record, error) {
	q := `SELECT ` + keyCols + ` FROM {{idempotency_keys}} WHERE provider = $1`
	args := []any{f.Provider}
	if len(f.States) > 0 {
		q += ` AND state IN (`
		for i, s := range f.States {
			if i > 0 {
				q += ", "
			}
			q += bind(&args, int(s))
		}
		q += `)`
	}
	if f.Unresolved {
		q += ` AND (state = 4 OR state = 1 AND lease_until <= ` + bind(&args, o.c.d.Time(f.At)) + `)`
	}
	q += ` ORDER BY created_at, idem_key`
	if f.Limit > 0 {
		q += " LIMIT " + bind(&args, f.Limit)
	}
	var out []keys.Record
	err := o.read(ctx, func(qr Querier) error {
		rs, err := qr.Query(ctx, o.c.render(q), args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r keys.Record
			if err := scanKey(rs, &r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rs.Err()
	})
	return out, err
}

// PurgeKeys implements the keys' part (keys' keyStore).
func (o *Outbox[Tx]) PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error) {
	var n int64
	err := o.c.inTx(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, o.c.render(`DELETE FROM {{idempotency_keys}} WHERE (provider, idem_key) IN (
			SELECT provider, idem_key FROM {{idempotency_keys}} WHERE provider = $1 AND state IN (2, 3) AND done_at < $2 LIMIT $3)`),
			provider, o.c.d.Time(before), limit)
		return err
	})
	return int(n), err
}
