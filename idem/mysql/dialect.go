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
// <prefix>aggregate_locks. Without returning (MySQL, MariaDB before 10.6,
// or forced: Options.portable), the statements that return what they
// wrote take sqlcore's portable forms (sqlcore.Dialect.NoReturning).
func newDialect(schema, prefix string, returning bool) sqlcore.Dialect {
	locks := quote(schema, prefix+"aggregate_locks")
	// A shared transaction's claim (idem.Options.Batch) is one statement
	// over the IDs as a JSON array, in their order, which returns the rows
	// it inserted (MariaDB). It inserts them in the array's order (which
	// keeps concurrent shared transactions from deadlocking on each
	// other's claims) with no ORDER BY: JSON_TABLE yields the elements in
	// their order and a one-table INSERT ... SELECT inserts each row as it
	// reads it, where an ORDER BY would sort them first (a filesort of
	// rows of up to 1024 characters: the claim took twice as long;
	// BENCHMARKS.md, issue 49). TestClaimManyInOrder checks the order
	// with row locks. IGNORE skips the duplicates; it would also turn a
	// value its column cannot hold into a warning, which cannot happen
	// here: the IDs are valid (at most 1024 bytes, the column's size)
	// before they are claimed, and an ID that JSON cannot carry is claimed
	// one by one.
	claimMany := `INSERT IGNORE INTO {{inbox}} (consumer, message_id, processed_at)
			SELECT $1, j.id, $3 FROM JSON_TABLE($2, '$[*]' COLUMNS (id VARCHAR(1024) PATH '$')) j`
	if returning {
		// Without it, the claim runs behind a savepoint, and one by one
		// when it inserted fewer rows than it has IDs
		// (sqlcore.Core.claimManyPortable).
		claimMany += " RETURNING message_id"
	}
	return sqlcore.Dialect{
		Rebind:      translate,
		Time:        func(t time.Time) any { return t.UnixMicro() },
		Quote:       quote,
		IsNoRows:    isNoRows,
		ClaimMany:   claimMany,
		NoReturning: !returning,
		Conflict:    ErrConflict,
		Array:       sqlcore.JSONArray,
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

// hasReturning reports whether the server of version (SELECT VERSION())
// runs the store's statements with RETURNING: MariaDB 10.6 and later (10.5
// has INSERT ... RETURNING, but the store needs 10.6's SKIP LOCKED
// anyway). MySQL has no RETURNING; neither has a version not understood.
func hasReturning(version string) bool {
	v := strings.TrimPrefix(version, "5.5.5-") // the replication prefix some proxies keep
	if !strings.Contains(strings.ToLower(v), "mariadb") {
		return false
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 10 || major == 10 && minor >= 6
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
	// DELETE FROM t WHERE (cols) IN (SELECT cols FROM t WHERE w LIMIT n),
	// the purges: MySQL neither takes LIMIT in an IN subquery nor reads
	// the table a DELETE deletes from.
	deleteIn = regexp.MustCompile(`(?s)^DELETE FROM (\S+) WHERE (\([^)]*\)|\w+) IN \(\s*SELECT ([\w, ]+) FROM (\S+) WHERE (.*) LIMIT (\$\d+)\)$`)
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
	// A purge is two statements (see querier.purge): a plain read of the
	// keys, then a DELETE of those keys. A DELETE ... WHERE w LIMIT n
	// would lock the rows it scans, and wait for an uncommitted claim
	// (a new row the scan meets, even beyond w's range) for as long as
	// innodb_lock_wait_timeout, holding the inbox's deliveries behind it.
	return deleteIn.ReplaceAllString(q, purgeMark+"SELECT $3 FROM $4 WHERE $5 LIMIT $6"+claimSplit+"DELETE FROM $1 WHERE $2 IN ("+purgeKeys+")")
}

// purgeMark starts a purge that translate made two statements, split at
// claimSplit; purgeKeys is where the second takes the keys the first read.
const (
	purgeMark = "/* wary:purge */"
	purgeKeys = "@keys@"
)

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

// claimMark starts the claim statement that claimQuery returns: three
// statements, split at claimSplit, which the querier runs one after the
// other (see querier.claim); claimIDs is where the second and third take
// the IDs of the heads the one before found.
const (
	claimMark  = "/* wary:claim */"
	claimSplit = ";;"
	claimIDs   = "@heads@"
)

// claimQuery is the relay's claim (see sqlcore.OutboxDialect.ClaimQuery
// for its parameters and columns), in three statements, because MariaDB
// locks every row a locking statement reads, its subqueries' and joins'
// included: one statement that both looked for the heads and locked them
// would lock the rows behind heads it passed over, which the relay
// holding such a head must mark (the source contract suite's lock wait
// timeouts, idemtest.SourceContract). So the first statement only reads:
// the aggregates with a pending row in aggregate order from $1 (after it,
// or from it for the first claim and the wrap-around; up to $5 for the
// latter), at most $2 of them, one index entry each (a loose index scan of
// outbox_unsent_idx), and of each its lowest unsent row (pending or
// quarantined) if it is pending and due at $3, at most $4. The second
// locks those heads by their IDs with FOR UPDATE SKIP LOCKED, through the
// primary key, so that it reads (and locks) no other row, and so that a
// head another relay holds is passed over; InnoDB reads a locked row's
// latest committed version, so a head sent since the first statement
// fails state = 0 and is passed over too. The third, a plain read again,
// returns each locked head's next pending rows, up to the per-aggregate
// parameter: a claimed head owns its aggregate. The rows wanted ($6, or
// $7) are not divided among the heads here: sqlcore's claim keeps that
// many, heads first. The claim's transaction is READ COMMITTED (the
// store's transactions are): no gap locks, which would hold producers'
// inserts behind a relay that publishes. readLimit, if positive, stands
// for max_allowed_packet as the largest row a claim reads (for tests).
func claimQuery(readLimit int64) func(below, first bool) string {
	limit := "@@max_allowed_packet"
	if readLimit > 0 {
		limit = strconv.FormatInt(readLimit, 10)
	}
	return func(below, first bool) string {
		bound, per := "", "$5"
		if below {
			bound, per = " AND p.aggregate_id <= $5", "$6"
		}
		from := " > $1"
		if first || below {
			from = " >= $1"
		}
		// A row the server cannot send (over max_allowed_packet, with a
		// margin for the rest of the result) comes without its payload,
		// its headers column saying why (sqlcore.Unreadable): the relay
		// quarantines it, and its aggregate waits behind it, nothing lost.
		size := "(LENGTH(r.payload) + LENGTH(r.headers) + LENGTH(r.type) + LENGTH(r.message_id) + LENGTH(r.aggregate_id) + LENGTH(r.last_error))"
		big := size + " + 65536 > " + limit
		cols := []string{"r.id", "r.message_id", "r.aggregate_id", "r.version", "r.sequence", "r.type",
			"IF(" + big + ", CONCAT(x'00', '" + sqlcore.Unreadable[1:] + "a row of ', " + size + ", ' bytes, larger than the server sends (max_allowed_packet ', " + limit + ", '): raise it and requeue the row'), r.headers)",
			"IF(" + big + ", '', r.payload)", "r.state", "r.attempts", "r.created_at", "r.next_attempt",
			"IF(" + big + ", '', r.last_error)", "r.sent_at"}
		// The lowest unsent row of an aggregate: the lower of its lowest
		// pending and its lowest quarantined, each one probe of
		// outbox_pending_idx (a MIN over state IN (0, 2) read every row
		// of the aggregate).
		lowest := func(state string) string {
			return "COALESCE((SELECT x.sequence FROM {{outbox}} x WHERE x.state = " + state +
				" AND x.aggregate_id = a.agg ORDER BY x.sequence LIMIT 1), 9223372036854775807)"
		}
		return claimMark + `SELECT o.id FROM (SELECT p.aggregate_id AS agg FROM {{outbox}} p
			WHERE p.state = 0 AND p.aggregate_id` + from + bound + `
			GROUP BY p.aggregate_id ORDER BY p.aggregate_id LIMIT $2) a
		JOIN {{outbox}} o ON o.aggregate_id = a.agg AND o.sequence = LEAST(` + lowest("0") + `, ` + lowest("2") + `)
		WHERE o.state = 0 AND o.next_attempt <= $3
		ORDER BY o.aggregate_id LIMIT $4` + claimSplit + `
	SELECT id FROM {{outbox}} FORCE INDEX (PRIMARY) WHERE id IN (` + claimIDs + `) AND state = 0 FOR UPDATE SKIP LOCKED` + claimSplit + `
	SELECT ` + strings.Join(cols, ", ") + `, h.seq, DENSE_RANK() OVER (ORDER BY h.agg) AS n
	FROM (SELECT aggregate_id AS agg, sequence AS seq FROM {{outbox}} WHERE id IN (` + claimIDs + `)) h
	JOIN {{outbox}} r ON r.aggregate_id = h.agg AND r.sequence >= h.seq AND r.sequence < h.seq + ` + per + ` AND r.state = 0
	ORDER BY h.agg, r.sequence`
	}
}
