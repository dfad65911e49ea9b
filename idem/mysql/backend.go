package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/internal/sqlcore"
	"github.com/wary-go/wary/idem/outbox"
)

// backend gives sqlcore the store's transactions, READ COMMITTED: on the
// transaction pool (tx, see implicit.go) when Open opened one, without a
// statement to begin them; otherwise on db, with START TRANSACTION, after
// SET TRANSACTION ISOLATION LEVEL READ COMMITTED when the connections'
// own level is another (MariaDB's and MySQL's default is REPEATABLE
// READ).
type backend struct {
	db *sql.DB
	// tx is the transaction pool, nil on a store of New.
	tx *sql.DB
	// setLevel: db.BeginTx asks for READ COMMITTED (one more round trip,
	// SET TRANSACTION ISOLATION LEVEL, before START TRANSACTION).
	setLevel bool
	// levelVar is the isolation level's variable the server answered to:
	// transaction_isolation, or tx_isolation (MariaDB before 11.1).
	levelVar string
	// packet is the server's max_allowed_packet.
	packet int64
	// returning: the server runs the store's statements with RETURNING
	// (MariaDB 10.6 and later); otherwise they take their portable forms.
	returning bool
	// refuseReturning makes the querier refuse a statement with
	// RETURNING, as MySQL does (the portable forms forced, in tests).
	refuseReturning bool
}

// inspect reads the connections' isolation level, max_allowed_packet and
// whether the driver reports found rows rather than changed rows.
//
// The inbox needs READ COMMITTED in its transactions: a version check
// whose UPDATE matched no row reads the row's version to say why, and
// under REPEATABLE READ that read sees the transaction's snapshot, which
// may be older than the row the UPDATE saw (a stale event reported as a
// gap, an applied transition as invalid). Under READ COMMITTED each
// statement reads the latest committed rows, and InnoDB takes no gap
// locks, which would hold other transactions' inserts (claims, outbox
// rows) behind a transaction that only read near them.
//
// pooled: the store has a transaction pool, whose sessions are READ
// COMMITTED whatever the level read.
func (b *backend) inspect(ctx context.Context, log *slog.Logger, pooled bool) error {
	var version string
	if err := b.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return fmt.Errorf("idem/mysql: read the server's version: %w", err)
	}
	if b.returning = hasReturning(version); !b.returning {
		log.DebugContext(ctx, "idem/mysql: the server has no RETURNING: the statements that read what they wrote take their portable forms, one more statement each",
			slog.String("version", version))
	}
	var level string
	b.levelVar = "transaction_isolation"
	err := b.db.QueryRowContext(ctx, "SELECT @@SESSION.transaction_isolation").Scan(&level)
	if err != nil { // MariaDB before 11.1 and MySQL 5.7 call it tx_isolation
		b.levelVar = "tx_isolation"
		if err2 := b.db.QueryRowContext(ctx, "SELECT @@SESSION.tx_isolation").Scan(&level); err2 != nil {
			return fmt.Errorf("idem/mysql: read the isolation level: %w", errors.Join(err, err2))
		}
	}
	b.setLevel = level != "READ-COMMITTED"
	if b.setLevel && !pooled {
		log.InfoContext(ctx, "idem/mysql: the connections' isolation level is not READ COMMITTED: the store's transactions set it, one more round trip each; set transaction_isolation (MariaDB before 11.1: tx_isolation) to 'READ-COMMITTED' in the DSN to save it, or open the store with Open, whose transactions need no statement to begin",
			slog.String("level", level))
	}
	if err := b.db.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&b.packet); err != nil {
		return fmt.Errorf("idem/mysql: read max_allowed_packet: %w", err)
	}
	return nil
}

// checkFoundRows fails if the driver reports found rows rather than
// changed rows (clientFoundRows=true): a claim knows whether it inserted
// by the rows affected of an upsert that changes nothing, 0 for a
// duplicate, which found rows count as 1. It updates the migrations
// table's first record to what it is.
func (b *backend) checkFoundRows(ctx context.Context, migrations string) error {
	res, err := b.db.ExecContext(ctx, "UPDATE "+migrations+" SET name = name WHERE version = 1")
	var me *gomysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoTable {
		return nil // not migrated (SkipMigrate): an operator's tool that will say so
	}
	if err != nil {
		return fmt.Errorf("idem/mysql: check the driver's rows affected: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 0 {
		return errors.New("idem/mysql: the DSN sets clientFoundRows=true, with which an update that changes nothing reports a row: the inbox could not tell a claim from a duplicate; open the database without it")
	}
	return nil
}

// Begin begins a transaction that ends only by Commit or Rollback:
// database/sql would roll it back when the context given to BeginTx ends,
// and a handler that succeeded must keep its effect although the caller's
// context ended before the commit (the inbox bounds the commit itself).
// On the transaction pool it sends nothing.
func (b *backend) Begin(ctx context.Context) (*sql.Tx, error) {
	if b.tx != nil {
		tx, err := b.tx.BeginTx(context.WithoutCancel(ctx), nil)
		return tx, classify(err)
	}
	var o *sql.TxOptions
	if b.setLevel {
		o = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := b.db.BeginTx(context.WithoutCancel(ctx), o)
	return tx, classify(err)
}

func (*backend) Commit(_ context.Context, tx *sql.Tx) error { return classify(tx.Commit()) }

func (*backend) Rollback(_ context.Context, tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

func (b *backend) Q(tx *sql.Tx) sqlcore.Querier { return querier{tx: tx, refuse: b.refuseReturning} }

// rowMargin is what a row's statement adds to its values, at most: the
// statement's text, quoting and escapes are counted as twice the values
// (interpolated, binary payloads are escaped) plus this.
const rowMargin = 16 << 10

// rowSize is the bytes a message's row takes in an INSERT statement, at
// most.
func rowSize(m outbox.Message) int64 {
	n := int64(len(m.Payload) + len(m.ID) + len(m.AggregateID) + len(m.Type))
	for k, v := range m.Headers.All() {
		n += int64(len(k)+len(v)) + 8
	}
	return 2*n + 256
}

// group returns how many of msgs (at least one) one AddOutbox sends in
// statements that fit in max_allowed_packet.
func (b *backend) group(msgs []outbox.Message) int {
	var total int64
	for i, m := range msgs {
		total += rowSize(m)
		if i > 0 && total+rowMargin > b.packet {
			return i
		}
	}
	return len(msgs)
}

// fits fails with ErrTooLarge if a message's row cannot be sent: its
// payload, headers and IDs (escaped) over the server's
// max_allowed_packet, less a margin for the statement around them.
func (b *backend) fits(msgs []outbox.Message) error {
	for _, m := range msgs {
		n := rowSize(m)
		if n+rowMargin > b.packet {
			return fmt.Errorf("%w: message %q of aggregate %q: about %d bytes, the server's max_allowed_packet is %d; nothing was added",
				ErrTooLarge, m.ID, m.AggregateID, n, b.packet)
		}
	}
	return nil
}

// binds caches bind's results by statement text: sqlcore's statements
// are a bounded set (an IN list's text varies with its length only).
var binds sync.Map // string -> bound

func bindCached(q string) bound {
	if b, ok := binds.Load(q); ok {
		return b.(bound)
	}
	b := bind(q)
	binds.Store(q, b)
	return b
}

// execer is a *sql.Tx or a *sql.DB.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// querier runs sqlcore's statements in a transaction (tx) or on the
// database (db), binding their $N placeholders positionally.
type querier struct {
	tx *sql.Tx
	db *sql.DB
	// refuse: a statement with RETURNING fails (backend.refuseReturning).
	refuse bool
}

// refused is the error of a statement with RETURNING where the querier
// refuses them, as MySQL would.
func (q querier) refused(query string) error {
	if q.refuse && strings.Contains(query, "RETURNING") {
		return fmt.Errorf("idem/mysql: a statement with RETURNING, which MySQL does not have, with the portable forms forced: %.200s", query)
	}
	return nil
}

func (q querier) on() execer {
	if q.tx != nil {
		return q.tx
	}
	return q.db
}

func args(b bound, in []any) []any {
	out := make([]any, len(b.args))
	for i, n := range b.args {
		if n < len(in) {
			out[i] = in[n]
		}
	}
	return out
}

func (q querier) Exec(ctx context.Context, query string, a ...any) (int64, error) {
	if err := q.refused(query); err != nil {
		return 0, err
	}
	if strings.HasPrefix(query, purgeMark) {
		return q.purge(ctx, query[len(purgeMark):], a)
	}
	b := bindCached(query)
	res, err := q.on().ExecContext(ctx, b.text, args(b, a)...)
	if err != nil {
		return 0, classify(err)
	}
	return res.RowsAffected()
}

func (q querier) QueryRow(ctx context.Context, query string, a ...any) sqlcore.Row {
	if err := q.refused(query); err != nil {
		return errRow{err}
	}
	b := bindCached(query)
	return row{q.on().QueryRowContext(ctx, b.text, args(b, a)...)}
}

func (q querier) Query(ctx context.Context, query string, a ...any) (sqlcore.Rows, error) {
	if err := q.refused(query); err != nil {
		return nil, err
	}
	if strings.HasPrefix(query, claimMark) {
		return q.claim(ctx, query[len(claimMark):], a)
	}
	b := bindCached(query)
	rs, err := q.on().QueryContext(ctx, b.text, args(b, a)...)
	if err != nil {
		return nil, classify(err)
	}
	return rows{rs}, nil
}

// claim runs the three statements of a claim (see claimQuery): the
// first finds the heads' IDs, the second locks those it can, the third
// returns the rows.
func (q querier) claim(ctx context.Context, query string, a []any) (sqlcore.Rows, error) {
	stmts := strings.SplitN(query, claimSplit, 3)
	var ids []int64
	for i, s := range stmts {
		s, sa := withIDs(s, ids, a)
		if s == "" {
			return noRows{}, nil
		}
		if i == len(stmts)-1 {
			return q.Query(ctx, s, sa...)
		}
		b := bindCached(s)
		rs, err := q.on().QueryContext(ctx, b.text, args(b, sa)...)
		if err != nil {
			return nil, classify(err)
		}
		ids = ids[:0]
		for rs.Next() {
			var id int64
			if err := rs.Scan(&id); err != nil {
				rs.Close()
				return nil, classify(err)
			}
			ids = append(ids, id)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, classify(err)
		}
	}
	return noRows{}, nil
}

// withIDs puts ids in s's place for them (claimIDs), as arguments after
// a; "" if s has the place and ids is empty.
func withIDs(s string, ids []int64, a []any) (string, []any) {
	if !strings.Contains(s, claimIDs) {
		return s, a
	}
	if len(ids) == 0 {
		return "", nil
	}
	out := append([]any(nil), a...)
	ph := make([]string, len(ids))
	for i, id := range ids {
		out = append(out, id)
		ph[i] = "$" + strconv.Itoa(len(out))
	}
	return strings.Replace(s, claimIDs, strings.Join(ph, ", "), 1), out
}

// purge runs the two statements of a purge (see translate): a plain
// read of the keys of the rows to delete (it waits for no lock), then a
// DELETE of those keys, which locks only them.
func (q querier) purge(ctx context.Context, query string, a []any) (int64, error) {
	find, del, _ := strings.Cut(query, claimSplit)
	b := bindCached(find)
	rs, err := q.on().QueryContext(ctx, b.text, args(b, a)...)
	if err != nil {
		return 0, classify(err)
	}
	cols, err := rs.Columns()
	if err != nil {
		rs.Close()
		return 0, classify(err)
	}
	var keys []any
	var tuples []string
	for rs.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			rs.Close()
			return 0, classify(err)
		}
		ph := make([]string, len(cols))
		for i := range row {
			keys = append(keys, row[i])
			ph[i] = "?"
		}
		tuples = append(tuples, "("+strings.Join(ph, ", ")+")")
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, classify(err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	list := strings.Join(tuples, ", ")
	if len(cols) == 1 {
		list = strings.Repeat("?, ", len(keys)-1) + "?"
	}
	res, err := q.on().ExecContext(ctx, strings.Replace(del, purgeKeys, list, 1), keys...)
	if err != nil {
		return 0, classify(err)
	}
	return res.RowsAffected()
}

// noRows is an empty result.
type noRows struct{}

func (noRows) Next() bool        { return false }
func (noRows) Scan(...any) error { return sql.ErrNoRows }
func (noRows) Err() error        { return nil }
func (noRows) Close()            {}

// errRow is a row that fails with its error.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type row struct{ *sql.Row }

func (r row) Scan(dest ...any) error { return classify(r.Row.Scan(dest...)) }

type rows struct{ *sql.Rows }

func (r rows) Close()     { _ = r.Rows.Close() }
func (r rows) Err() error { return classify(r.Rows.Err()) }

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// MySQL's error numbers that classify sorts.
const (
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
	errNoTable         = 1146
)

// dataErrors are the errors of the server refusing a value of one
// message: data too long for its column (1406), an incorrect string value
// for the column's character set (1366), a value out of range (1264), a
// key too long (1071), and a row or packet too large (1118, 1153,
// 1301).
var dataErrors = map[uint16]bool{1406: true, 1366: true, 1264: true, 1071: true, 1118: true, 1153: true, 1301: true}

// conflict reports whether err is a deadlock's victim or a lock wait
// timeout.
func conflict(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDeadlock || me.Number == errLockWaitTimeout)
}

// classify marks the errors of the server refusing a value of one message
// as idem.ErrData (and broker.Permanent), a deadlock's victim and a lock
// wait timeout as ErrConflict, and a statement over the client's packet
// limit as ErrTooLarge; everything else is left as it is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gomysql.ErrPktTooLarge) {
		return seam.DataError(fmt.Errorf("%w: %w", ErrTooLarge, err))
	}
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return err
	}
	switch {
	case me.Number == errDeadlock || me.Number == errLockWaitTimeout:
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case dataErrors[me.Number]:
		return seam.DataError(err)
	case strings.Contains(me.Message, "max_allowed_packet"):
		return seam.DataError(fmt.Errorf("%w: %w", ErrTooLarge, err))
	}
	return err
}
