package sqlcore

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/names"
)

type queries struct {
	claim, purge, purgeFailures, recordFailure, clearFailure string
	hasParked, park, listParked, deleteParked, updateParked  string
	listParkedNoBody                                         string
	claimMany, claimCheck                                    string
	// failureRead: the portable form's read (see Dialect.NoReturning).
	failureRead string
}

// buildQueries renders the inbox's statements; without returning, those
// that would return what they wrote leave it out (Dialect.NoReturning).
func buildQueries(r func(string) string, returning bool) queries {
	ret := func(cols string) string {
		if !returning {
			return ""
		}
		return "\n\t\t\tRETURNING " + cols
	}
	return queries{
		claim: r(`INSERT INTO {{inbox}} (consumer, message_id, processed_at) VALUES ($1, $2, $3)
			ON CONFLICT (consumer, message_id) DO NOTHING`),
		purge: r(`DELETE FROM {{inbox}} WHERE (consumer, message_id) IN (
			SELECT consumer, message_id FROM {{inbox}} WHERE consumer = $1 AND processed_at < $2 LIMIT $3)`),
		purgeFailures: r(`DELETE FROM {{failures}} WHERE (consumer, message_id) IN (
			SELECT consumer, message_id FROM {{failures}} WHERE consumer = $1 AND last_seen < $2 LIMIT $3)`),
		recordFailure: r(`INSERT INTO {{failures}} AS f (consumer, message_id, attempts, first_seen, last_seen, reason)
			VALUES ($1, $2, 1, $3, $3, $4)
			ON CONFLICT (consumer, message_id) DO UPDATE
			SET attempts = f.attempts + 1, last_seen = excluded.last_seen, reason = excluded.reason` + ret("attempts, first_seen")),
		failureRead:  r(`SELECT attempts, first_seen FROM {{failures}} WHERE consumer = $1 AND message_id = $2`),
		clearFailure: r(`DELETE FROM {{failures}} WHERE consumer = $1 AND message_id = $2`),
		hasParked:    r(`SELECT 1 FROM {{parked}} WHERE consumer = $1 AND aggregate_id = $2 LIMIT 1`),
		park: r(`INSERT INTO {{parked}} (consumer, message_id, aggregate_id, version, sequence, msg_key, headers, body,
			reason, attempts, first_seen, last_seen) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (consumer, message_id) DO NOTHING`),
		listParked:       r(parkedList(true)),
		listParkedNoBody: r(parkedList(false)),
		deleteParked:     r(`DELETE FROM {{parked}} WHERE consumer = $1 AND id = $2`),
		updateParked:     r(`UPDATE {{parked}} SET reason = $3, attempts = attempts + 1, last_seen = $4 WHERE consumer = $1 AND id = $2`),
	}
}

// parkedList is the SELECT of ListParked, with the bodies or, for a
// listing that does not read them, NULL in their place.
func parkedList(body bool) string {
	col := "body"
	if !body {
		col = "NULL"
	}
	return `SELECT id, message_id, aggregate_id, version, sequence, msg_key, headers, ` + col + `,
			reason, attempts, first_seen, last_seen FROM {{parked}}`
}

// quoteTable quotes a validated, possibly schema-qualified, table name.
func (c *Core[Tx]) quoteTable(name string) (string, error) {
	parts, err := names.ValidateTableName(name)
	if err != nil {
		return "", err
	}
	if len(parts) == 2 {
		return c.d.Quote(parts[0], parts[1]), nil
	}
	return c.d.Quote("", parts[0]), nil
}

// CheckVersion implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) CheckVersion(ctx context.Context, tx Tx, t idem.VersionTable, id string, version int64) (idem.VersionCheck, error) {
	qs, ok := c.cache.Load(t)
	if !ok {
		if err := t.Validate(); err != nil {
			return idem.VersionCheck{}, err
		}
		tbl, _ := c.quoteTable(t.Table)
		idc, vc := c.d.Quote("", t.IDColumn), c.d.Quote("", t.VersionColumn)
		qs = [2]string{
			c.d.Rebind(fmt.Sprintf("UPDATE %s SET %s = $2 WHERE %s = $1 AND %s = $3", tbl, vc, idc, vc)),
			c.d.Rebind(fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", vc, tbl, idc)),
		}
		c.cache.Store(t, qs)
	}
	q := qs.([2]string)
	db := c.b.Q(tx)
	n, err := db.Exec(ctx, q[0], id, version, version-1)
	if err != nil {
		return idem.VersionCheck{}, err
	}
	if n == 1 {
		return idem.VersionCheck{Result: idem.VersionApplied, Current: version}, nil
	}
	var cur int64
	err = db.QueryRow(ctx, q[1], id).Scan(&cur)
	switch {
	case c.d.IsNoRows(err):
		return idem.VersionCheck{Result: idem.VersionMissing}, nil
	case err != nil:
		return idem.VersionCheck{}, err
	case cur >= version:
		return idem.VersionCheck{Result: idem.VersionStale, Current: cur}, nil
	case cur == version-1:
		// Updated by a transaction that committed between our two
		// statements: treat as a gap, so that the retry applies it.
		fallthrough
	default:
		return idem.VersionCheck{Result: idem.VersionGap, Current: cur}, nil
	}
}

// Transition implements the inbox's part (idem's inboxStore).
func (c *Core[Tx]) Transition(ctx context.Context, tx Tx, t idem.StateTable, id, to string, from ...string) (idem.TransitionCheck, error) {
	qs, ok := c.cache.Load(t)
	if !ok {
		if err := t.Validate(); err != nil {
			return idem.TransitionCheck{}, err
		}
		tbl, _ := c.quoteTable(t.Table)
		idc, sc := c.d.Quote("", t.IDColumn), c.d.Quote("", t.StateColumn)
		qs = [2]string{
			fmt.Sprintf("UPDATE %s SET %s = $2 WHERE %s = $1 AND %s IN (", tbl, sc, idc, sc),
			c.d.Rebind(fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", sc, tbl, idc)),
		}
		c.cache.Store(t, qs)
	}
	q := qs.([2]string)
	db := c.b.Q(tx)
	args := []any{id, to}
	var in []string
	for _, f := range from {
		if f != to && !slices.Contains(in, f) {
			in = append(in, f)
		}
	}
	if len(in) > 0 {
		ph := make([]string, len(in))
		for i, f := range in {
			args = append(args, f)
			ph[i] = "$" + strconv.Itoa(len(args))
		}
		n, err := db.Exec(ctx, c.d.Rebind(q[0]+strings.Join(ph, ", ")+")"), args...)
		if err != nil {
			return idem.TransitionCheck{}, err
		}
		if n == 1 {
			return idem.TransitionCheck{Result: idem.TransitionApplied, State: to}, nil
		}
	}
	var cur string
	err := db.QueryRow(ctx, q[1], id).Scan(&cur)
	switch {
	case c.d.IsNoRows(err):
		return idem.TransitionCheck{Result: idem.TransitionMissing}, nil
	case err != nil:
		return idem.TransitionCheck{}, err
	case cur == to:
		return idem.TransitionCheck{Result: idem.TransitionAlready, State: cur}, nil
	}
	return idem.TransitionCheck{Result: idem.TransitionInvalid, State: cur}, nil
}

// Migrate applies the migrations in dir of fsys that are not applied yet,
// in one transaction. Files are named NNN_description.sql and may use
// {{name}} for each of Tables.
func (c *Core[Tx]) Migrate(ctx context.Context, fsys fs.FS, dir string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return err
	}
	type mig struct {
		v    int
		name string
	}
	var migs []mig
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(name, ".sql") {
			return fmt.Errorf("idem: migration file %q is not named NNN_description.sql", name)
		}
		migs = append(migs, mig{v, name})
	}
	slices.SortFunc(migs, func(a, b mig) int { return a.v - b.v })
	return c.inTx(ctx, func(q Querier) error {
		if c.d.Lock != "" {
			h := fnv.New64a()
			h.Write([]byte("wary-idem-migrate:" + c.names["migrations"]))
			if _, err := q.Exec(ctx, c.d.Lock, int64(h.Sum64())); err != nil {
				return fmt.Errorf("idem: migration lock: %w", err)
			}
		}
		if c.schema != "" && c.d.CreateSchema != "" {
			if _, err := q.Exec(ctx, fmt.Sprintf(c.d.CreateSchema, c.d.Quote("", c.schema))); err != nil {
				return fmt.Errorf("idem: create schema: %w", err)
			}
		}
		if _, err := q.Exec(ctx, c.render(`CREATE TABLE IF NOT EXISTS {{migrations}} (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)); err != nil {
			return fmt.Errorf("idem: create migrations table: %w", err)
		}
		applied := map[int]bool{}
		rows, err := q.Query(ctx, c.render(`SELECT version FROM {{migrations}}`))
		if err != nil {
			return err
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return err
			}
			applied[v] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, m := range migs {
			if applied[m.v] {
				continue
			}
			b, err := fs.ReadFile(fsys, path.Join(dir, m.name))
			if err != nil {
				return err
			}
			if _, err := q.Exec(ctx, c.render(string(b))); err != nil {
				return fmt.Errorf("idem: migration %s: %w", m.name, err)
			}
			if _, err := q.Exec(ctx, c.render(`INSERT INTO {{migrations}} (version, name, applied_at) VALUES ($1, $2, $3)`),
				m.v, m.name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
				return err
			}
		}
		return nil
	})
}
