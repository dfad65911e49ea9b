package mysql

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/idem/internal/sqlcore"
)

// newDialect is MySQL's: backquoted names, times as Unix microseconds,
// the statements sqlcore writes in PostgreSQL's syntax translated (see
// translate), and the aggregate locks of early events on the rows of
// <prefix>aggregate_locks.
func newDialect(schema, prefix string) sqlcore.Dialect {
	locks := quote(schema, prefix+"aggregate_locks")
	return sqlcore.Dialect{
		Rebind:   translate,
		Time:     func(t time.Time) any { return t.UnixMicro() },
		Quote:    quote,
		IsNoRows: isNoRows,
		// The database is created by Migrate, before its own tables.
		CreateSchema: "CREATE DATABASE IF NOT EXISTS %s",
		// A lock key's top 10 bits name its row: keys locked in ascending
		// order lock rows in ascending order (DIV truncates toward zero,
		// which keeps the order), so two transactions locking several
		// aggregates cannot deadlock on these rows. An UPDATE that changes
		// nothing still takes the row's exclusive lock, held until the
		// transaction ends.
		AggregateLock: "UPDATE " + locks + " SET k = k WHERE k = $1 DIV 18014398509481984 + 512",
	}
}

// quote quotes a name with backquotes, qualified by schema (a database)
// when not empty.
func quote(schema, name string) string {
	q := "`" + strings.ReplaceAll(name, "`", "``") + "`"
	if schema == "" {
		return q
	}
	return "`" + strings.ReplaceAll(schema, "`", "``") + "`." + q
}

var (
	// ON CONFLICT (cols) DO NOTHING: an upsert that changes nothing, which
	// MySQL reports as 0 rows affected (1 for an insert), so a claim knows
	// exactly whether it inserted. INSERT IGNORE would also turn a value
	// the column cannot hold into a warning and a truncated row.
	doNothing = regexp.MustCompile(`ON CONFLICT \(\s*(\w+)[^)]*\) DO NOTHING`)
	// INSERT INTO t AS a (...) ... ON CONFLICT (...) DO UPDATE SET, with
	// a.col and excluded.col in the assignments.
	insertAlias = regexp.MustCompile(`INSERT INTO (\S+) AS (\w+) \(`)
	doUpdate    = regexp.MustCompile(`ON CONFLICT \([^)]*\) DO UPDATE\s+SET`)
	excluded    = regexp.MustCompile(`\bexcluded\.(\w+)`)
	// DELETE FROM t WHERE (cols) IN (SELECT cols FROM t WHERE w LIMIT n):
	// MySQL neither takes LIMIT in an IN subquery nor reads the table a
	// DELETE deletes from; a DELETE takes LIMIT itself.
	deleteIn = regexp.MustCompile(`(?s)^DELETE FROM (\S+) WHERE (?:\([^)]*\)|\w+) IN \(\s*SELECT [\w, ]+ FROM \S+ WHERE (.*) LIMIT (\$\d+)\)$`)
)

// translate rewrites the few constructs of sqlcore's statements that
// MySQL spells differently; a statement without them is left as it is.
// It is applied to every statement sqlcore renders (the store suite runs
// each of them on MariaDB), and leaves $N placeholders to the querier,
// which binds them positionally.
func translate(q string) string {
	q = strings.TrimSpace(q)
	q = doNothing.ReplaceAllString(q, "ON DUPLICATE KEY UPDATE $1 = $1")
	if m := insertAlias.FindStringSubmatch(q); m != nil && doUpdate.MatchString(q) {
		q = strings.Replace(q, m[0], "INSERT INTO "+m[1]+" (", 1)
		q = doUpdate.ReplaceAllString(q, "ON DUPLICATE KEY UPDATE")
		q = excluded.ReplaceAllString(q, "VALUES($1)")
		q = regexp.MustCompile(`\b`+regexp.QuoteMeta(m[2])+`\.(\w+)`).ReplaceAllString(q, "$1")
	}
	return deleteIn.ReplaceAllString(q, "DELETE FROM $1 WHERE $2 LIMIT $3")
}

// placeholder is a $N placeholder.
var placeholder = regexp.MustCompile(`\$(\d+)`)

// bound is a statement with positional placeholders and, for each, the
// index of its argument in the $N numbering.
type bound struct {
	text string
	args []int
}

// bind rewrites q's $N placeholders to ?, each argument repeated where
// its placeholder is. The text between quotes is not rewritten.
func bind(q string) bound {
	var b bound
	var out strings.Builder
	inQuote := byte(0)
	last := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case inQuote != 0:
			if c == inQuote {
				inQuote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			inQuote = c
		case c == '$':
			loc := placeholder.FindStringSubmatchIndex(q[i:])
			if loc == nil || loc[0] != 0 {
				continue
			}
			n, _ := strconv.Atoi(q[i+loc[2] : i+loc[3]])
			out.WriteString(q[last:i])
			out.WriteByte('?')
			b.args = append(b.args, n-1)
			i += loc[1] - 1
			last = i + 1
		}
	}
	out.WriteString(q[last:])
	b.text = out.String()
	return b
}

// claimQuery is the relay's claim (see sqlcore.OutboxDialect.ClaimQuery
// for its parameters and columns). The derived table h takes the heads:
// in aggregate order from $1 (after it, or from it for the first claim
// and the wrap-around; up to $5 for the latter), each aggregate's lowest
// unsent row (pending or quarantined) if it is pending and due at $3, at
// most $4, locked with FOR UPDATE SKIP LOCKED, so that a head another
// relay holds is passed over. InnoDB evaluates a locking read's
// conditions on the latest committed version of the row it locks, so a
// head sent and committed since the statement began is passed over too;
// the lowest unsent row is read from the statement's snapshot, in which
// a head that another relay holds is still unsent, so the rows behind it
// are not heads. The claim's transaction is READ COMMITTED (the store's
// transactions are): no gap locks, which would hold producers' inserts
// behind a relay that publishes. The outer query adds each head's next
// pending rows, up to the per-aggregate parameter, unlocked: a claimed
// head owns its aggregate. The rows wanted ($6, or $7) are not divided
// among the heads here: sqlcore's claim keeps that many, heads first.
// ($2, how many aggregates to visit, is for PostgreSQL's skip scan.)
func claimQuery(below, first bool) string {
	bound, per := "", "$5"
	if below {
		bound, per = " AND o.aggregate_id <= $5", "$6"
	}
	from := " > $1"
	if first || below {
		from = " >= $1"
	}
	cols := []string{"id", "message_id", "aggregate_id", "version", "sequence", "type", "headers", "payload", "state", "attempts",
		"created_at", "next_attempt", "last_error", "sent_at"}
	for i, c := range cols {
		cols[i] = "r." + c
	}
	return `SELECT ` + strings.Join(cols, ", ") + `, h.seq, DENSE_RANK() OVER (ORDER BY h.agg) AS n
	FROM (SELECT o.aggregate_id AS agg, o.sequence AS seq FROM {{outbox}} o
		WHERE o.state = 0 AND o.aggregate_id` + from + bound + ` AND o.next_attempt <= $3
			AND o.sequence = (SELECT MIN(x.sequence) FROM {{outbox}} x WHERE x.aggregate_id = o.aggregate_id AND x.state IN (0, 2))
		ORDER BY o.aggregate_id LIMIT $4 FOR UPDATE SKIP LOCKED) h
	JOIN {{outbox}} r ON r.aggregate_id = h.agg AND r.sequence >= h.seq AND r.sequence < h.seq + ` + per + ` AND r.state = 0
	ORDER BY h.agg, r.sequence`
}
