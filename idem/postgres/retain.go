package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rotateWait bounds how long a rotation of the inbox or the outbox waits
// for the transactions that used its current table (claims and adds queue
// behind it meanwhile).
const rotateWait = 2 * time.Second

// slicedCheck is the check a sliced inbox puts on its current table: v
// IS NOT NULL. Claims of binaries before 009 do not set v; a sliced claim
// sets it from the current table's mark, NULL when the claim's snapshot
// predates the rotation that created the table.
const slicedCheck = "inbox_sliced_since_migration_014"

// mark is the current table's mark as a claim reads it: 1 where the row of
// consumer ” (no consumer's name: names.ValidateConsumer) is visible.
const mark = `(SELECT 1::smallint FROM {{inbox}} WHERE consumer = '' AND message_id = '')`

// The claims of a sliced inbox: in the current table, unless the previous
// one holds the record. Three index probes (the mark, the previous table,
// the current one's key) however large the tables are. In the batch
// claims, OFFSET 0 keeps each NOT EXISTS a probe of the key per ID, as in
// strictClaimMany: as an anti join, a generic plan made on a small table
// hashed all of the consumer's records.
const (
	// slicedClaim is BeginClaim's: without ON CONFLICT, as strictClaim;
	// a duplicate in either table makes it insert nothing.
	slicedClaim = `INSERT INTO {{inbox}} (consumer, message_id, processed_at, v)
		SELECT $1::text, $2::text, $3::timestamptz, ` + mark + `
		WHERE NOT EXISTS (SELECT 1 FROM {{inbox_prev}} WHERE consumer = $1 AND message_id = $2)
			AND NOT EXISTS (SELECT 1 FROM {{inbox}} WHERE consumer = $1 AND message_id = $2)`
	slicedClaimMany = `INSERT INTO {{inbox}} (consumer, message_id, processed_at, v)
		SELECT $1::text, id, $3::timestamptz, ` + mark + ` FROM unnest($2::text[]) AS ids(id)
		WHERE NOT EXISTS (SELECT 1 FROM {{inbox_prev}} p WHERE p.consumer = $1 AND p.message_id = ids.id OFFSET 0)
		ORDER BY id COLLATE "C"
		ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id`
	// slicedStrictClaimMany is slicedClaim for several IDs (BeginClaim):
	// it returns the IDs it inserted, those missing from its answer being
	// duplicates.
	slicedStrictClaimMany = `INSERT INTO {{inbox}} (consumer, message_id, processed_at, v)
		SELECT $1::text, id, $3::timestamptz, ` + mark + ` FROM unnest($2::text[]) AS ids(id)
		WHERE NOT EXISTS (SELECT 1 FROM {{inbox_prev}} p WHERE p.consumer = $1 AND p.message_id = ids.id OFFSET 0)
			AND NOT EXISTS (SELECT 1 FROM {{inbox}} i WHERE i.consumer = $1 AND i.message_id = ids.id OFFSET 0)
		ORDER BY id COLLATE "C"
		RETURNING message_id`
	slicedClaimCheck = `WITH claim AS (INSERT INTO {{inbox}} (consumer, message_id, processed_at, v)
			SELECT $1::text, $2::text, $3::timestamptz, ` + mark + `
			WHERE NOT EXISTS (SELECT 1 FROM {{inbox_prev}} WHERE consumer = $1 AND message_id = $2)
			ON CONFLICT (consumer, message_id) DO NOTHING RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM claim),
			EXISTS (SELECT 1 FROM {{parked}} WHERE consumer = $1 AND aggregate_id = $4)`
	// noPurge deletes no record: a sliced inbox's records go by rotation.
	noPurge = `DELETE FROM {{inbox}} WHERE false AND consumer = $1 AND processed_at < $2 AND $3::bigint > 0`
)

// slicedQuery tells whether the inbox $1 is sliced (has the check $2).
const slicedQuery = `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`

// checkLayout makes the inbox sliced (the check, the mark) if
// Options.InboxSlice is set, and refuses a sliced inbox if it is not.
func (s *driver) checkLayout(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var sliced bool
		if err := tx.QueryRow(ctx, slicedQuery, s.Name("inbox"), slicedCheck).Scan(&sliced); err != nil {
			return fmt.Errorf("idem/postgres: inbox layout: %w", err)
		}
		switch {
		case sliced == (s.slice > 0):
			return nil
		case sliced:
			return fmt.Errorf("idem/postgres: the inbox %s is sliced: set Options.InboxSlice (docs/retention.md says how to leave slices)", s.Name("inbox"))
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE "+s.Name("inbox")+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.Name("inbox")+` (consumer, message_id, processed_at, v) VALUES ('', '', '-infinity', 1)
			ON CONFLICT (consumer, message_id) DO NOTHING`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DO $$ BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = '`+s.Name("inbox")+`'::regclass AND conname = '`+slicedCheck+`') THEN
				ALTER TABLE `+s.Name("inbox")+` ADD CONSTRAINT `+slicedCheck+` CHECK (v IS NOT NULL) NOT VALID;
			END IF; END $$`)
		return err
	})
}

// staleClaim turns the check violation of a sliced claim whose snapshot
// predates the current table (its mark unseen) into a serialization
// failure, which the inbox retries in a new transaction.
func staleClaim(pe *pgconn.PgError) error {
	if pe.Code != "23514" || pe.ConstraintName != slicedCheck {
		return nil
	}
	return fmt.Errorf("idem/postgres: the inbox rotated after this transaction's snapshot, or a binary of before migration 014 claims here: %w",
		&pgconn.PgError{Code: "40001", Message: pe.Message, ConstraintName: pe.ConstraintName, TableName: pe.TableName})
}

// Expire implements idem's expirer: it deletes, in batches of at most
// limit, the records claimed before now-retention and the failure records
// last seen before it, as Purge does. With Options.InboxSlice it deletes
// no record but rotates the inbox once the current table is InboxSlice
// old (see rotate), and returns the records of the previous table it
// dropped; a retention longer than InboxSlice is refused.
func (s *driver) Expire(ctx context.Context, consumer string, now time.Time, retention time.Duration, limit int) (int, error) {
	n, err := s.Core.Purge(ctx, consumer, now.Add(-retention), limit)
	if err != nil || s.slice <= 0 {
		return n, err
	}
	if retention > s.slice {
		return n, fmt.Errorf("idem/postgres: consumer %q keeps inbox records %v, longer than Options.InboxSlice (%v), which keeps them at least that long", consumer, retention, s.slice)
	}
	m, err := s.rotate(ctx, now)
	return n + m, err
}

// rotate drops the previous table, renames the current one previous and
// creates a new current table marked now, if the current table's mark is
// InboxSlice older than now; it returns the records dropped, as
// rowsOf counts them. It runs in one transaction that locks both tables
// (ACCESS EXCLUSIVE, current first), waiting at most rotateWait for the
// transactions that claimed in them: a claim after it resolves the
// tables' names anew, and under READ COMMITTED reads them with a snapshot
// taken after the lock, so it sees every record the previous table holds.
// Consecutive rotations are at least InboxSlice apart, so a record, in the
// current table from its claim to the next rotation and in the previous
// one until the one after, is kept at least InboxSlice.
//
// The lock is held for renames and a CREATE only: the previous table is
// renamed inbox_old inside it and dropped after the commit (its files
// unlinked while no claim waits), and one a crash left behind is dropped
// before the next rotation's lock.
func (s *driver) rotate(ctx context.Context, now time.Time) (int, error) {
	cur, prev, old := s.Name("inbox"), s.Name("inbox_prev"), s.Name("inbox_old")
	due := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (bool, error) {
		var ok bool
		err := q.QueryRow(ctx, "SELECT processed_at <= $1 FROM "+cur+" WHERE consumer = '' AND message_id = ''", now.Add(-s.slice)).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return true, nil
		}
		return ok, err
	}
	if ok, err := due(s.pool); err != nil || !ok {
		return 0, err
	}
	if _, err := s.pool.Exec(ctx, "DROP TABLE IF EXISTS "+old); err != nil {
		return 0, fmt.Errorf("idem/postgres: inbox rotation: %w", err)
	}
	dropped, err := rowsOf(ctx, s.pool, prev, "consumer <> ''") // read-only: counted before the lock
	if err != nil {
		return 0, fmt.Errorf("idem/postgres: inbox rotation: %w", err)
	}
	rotated := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(rotateWait.Milliseconds(), 10)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE "+cur+", "+prev+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			return err
		}
		if ok, err := due(tx); err != nil || !ok { // another process rotated meanwhile
			return err
		}
		for _, q := range []string{
			"ALTER TABLE " + prev + " RENAME TO " + pgx.Identifier{s.inbox + "_old"}.Sanitize(),
			"ALTER TABLE " + cur + " RENAME TO " + pgx.Identifier{s.inbox + "_prev"}.Sanitize(),
			"CREATE TABLE " + cur + ` (consumer TEXT NOT NULL, message_id TEXT NOT NULL, processed_at TIMESTAMPTZ NOT NULL,
				v SMALLINT CONSTRAINT ` + slicedCheck + ` CHECK (v IS NOT NULL), PRIMARY KEY (consumer, message_id))`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+cur+" (consumer, message_id, processed_at, v) VALUES ('', '', $1, 1)", now); err != nil {
			return err
		}
		rotated = true
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("idem/postgres: inbox rotation: %w", err)
	}
	if !rotated {
		return 0, nil
	}
	if _, err := s.pool.Exec(ctx, "DROP TABLE IF EXISTS "+old); err != nil {
		return int(dropped), fmt.Errorf("idem/postgres: inbox rotation: dropping the previous table: %w", err)
	}
	return int(dropped), nil
}

// rowsOf returns how many rows of table, which nothing writes to any
// more, match where: the planner's estimate where ANALYZE (or
// autovacuum) has measured the table (pg_class.reltuples scaled to the
// table's size now, as the planner scales it, times the fraction where
// selects: an exact count of a large table would be a scan of it
// beside the claims), else an exact count (a table never analysed is
// small, or new).
func rowsOf(ctx context.Context, pool *pgxpool.Pool, table, where string) (int64, error) {
	var est float64
	err := pool.QueryRow(ctx, `SELECT CASE WHEN c.reltuples >= 0 AND c.relpages > 0
			THEN c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::bigint) ELSE -1 END
		FROM pg_class c WHERE c.oid = $1::regclass`, table).Scan(&est)
	if err != nil {
		return 0, err
	}
	if est >= 0 {
		return int64(est), nil
	}
	var n int64
	err = pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE "+where).Scan(&n)
	return n, err
}

// Unclaim implements the operator's part: the record goes from the current table
// and, if sliced, from the previous one.
func (s *driver) Unclaim(ctx context.Context, tx pgx.Tx, consumer, messageID string) (bool, error) {
	ok, err := s.Core.Unclaim(ctx, tx, consumer, messageID)
	if err != nil || s.slice <= 0 {
		return ok, err
	}
	tag, err := tx.Exec(ctx, "DELETE FROM "+s.Name("inbox_prev")+" WHERE consumer = $1 AND message_id = $2", consumer, messageID)
	if err != nil {
		return false, fmt.Errorf("unclaim: %w", err)
	}
	return ok || tag.RowsAffected() > 0, nil
}
