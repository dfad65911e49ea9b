package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/wary-go/wary/idem/store"
)

// The outbox stream (store.Streamer, a relay with RelayOptions.Stream):
// logical replication of the outbox table's inserts, from a slot with the
// pgoutput plugin and a publication on the table (publish = 'insert'),
// both named like the outbox's notification channel (Store.StreamSlot).
// A relay opens a replication connection (the pool's configuration with
// replication=database), creates the publication and the slot if they
// are missing (or the slot was invalidated: wal_status lost), and streams
// from the slot's confirmed position. The table stays the source of
// truth: a window of streamed rows is published only if its rows are
// still pending there (Publishable), published rows are deleted in one
// statement (Settle), and only then is the slot confirmed past them.

// statusEvery is how often the stream reports its position to the server
// at most, and standbyTimeout how often at least.
const (
	statusEvery    = 50 * time.Millisecond
	standbyTimeout = 10 * time.Second
)

// StreamSlot returns the names of the outbox stream's replication slot and
// publication (one name for both).
func (s *Store) StreamSlot() string { return s.d.slot() }

func (s *driver) slot() string { return s.Outbox.Channel() }

var _ store.Streamer = (*driver)(nil)

// CheckStream reports what the server lacks for the outbox stream
// (wal_level, a free replication slot, the REPLICATION attribute), one
// error per missing thing, or nil.
func (s *Store) CheckStream(ctx context.Context) error { return s.d.checkStream(ctx) }

func (s *driver) checkStream(ctx context.Context) error {
	var level, user string
	var repl, exists bool
	var slots, used int
	err := s.pool.QueryRow(ctx, `SELECT current_setting('wal_level'), current_user,
		(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user),
		current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_replication_slots),
		EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, s.slot()).
		Scan(&level, &user, &repl, &slots, &used, &exists)
	if err != nil {
		return fmt.Errorf("%w: %w", store.ErrStreamUnavailable, err)
	}
	var missing []error
	if level != "logical" {
		missing = append(missing, fmt.Errorf("%w: wal_level is %s, not logical (ALTER SYSTEM SET wal_level = logical, then restart the server)",
			store.ErrStreamUnavailable, level))
	}
	if !exists && used >= slots {
		missing = append(missing, fmt.Errorf("%w: max_replication_slots is %d and all are in use (raise it, then restart the server)",
			store.ErrStreamUnavailable, slots))
	}
	if !repl {
		missing = append(missing, fmt.Errorf("%w: role %s has no REPLICATION attribute (ALTER ROLE %s REPLICATION)",
			store.ErrStreamUnavailable, user, pgx.Identifier{user}.Sanitize()))
	}
	return errors.Join(missing...)
}

// OpenOutboxStream implements store.Streamer.
func (s *driver) OpenOutboxStream(ctx context.Context, owner string) (store.OutboxStream, error) {
	if err := s.checkStream(ctx); err != nil {
		return nil, err
	}
	if err := s.ensurePublication(ctx); err != nil {
		return nil, fmt.Errorf("%w: publication: %w", store.ErrStreamUnavailable, err)
	}
	var active bool
	var walStatus *string
	err := s.pool.QueryRow(ctx, `SELECT active, wal_status FROM pg_replication_slots WHERE slot_name = $1`, s.slot()).Scan(&active, &walStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("%w: %w", store.ErrStreamUnavailable, err)
	case active:
		return nil, store.ErrStreamHeld
	case walStatus != nil && *walStatus == "lost":
		// Invalidated (max_slot_wal_keep_size): it can stream nothing
		// again. Rows committed since are in the table.
		if _, err := s.pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, s.slot()); err != nil {
			return nil, fmt.Errorf("%w: drop the invalidated slot: %w", store.ErrStreamUnavailable, err)
		}
	}
	cfg := s.pool.Config().ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "wary relay " + owner
	for k, v := range streamParams {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: replication connection: %w", store.ErrStreamUnavailable, err)
	}
	st := &stream{d: s, conn: conn, rel: map[uint32]*pglogrepl.RelationMessage{}}
	if errors.Is(err, pgx.ErrNoRows) || walStatus != nil && *walStatus == "lost" {
		_, err := pglogrepl.CreateReplicationSlot(ctx, conn, s.slot(), "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			if pgCode(err) == "42710" { // another relay created it
				return nil, store.ErrStreamHeld
			}
			return nil, fmt.Errorf("%w: create slot: %w", store.ErrStreamUnavailable, err)
		}
		st.fresh = true
	}
	err = pglogrepl.StartReplication(ctx, conn, s.slot(), 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + s.slot() + "'"}})
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		switch pgCode(err) {
		case "55006": // object in use: another relay streams from the slot
			return nil, store.ErrStreamHeld
		case "42704": // the slot was dropped meanwhile
			return nil, fmt.Errorf("%w: the slot vanished: %w", store.ErrStreamUnavailable, err)
		}
		return nil, fmt.Errorf("%w: start replication: %w", store.ErrStreamUnavailable, err)
	}
	return st, nil
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func (s *driver) ensurePublication(ctx context.Context) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, s.slot()).Scan(&ok); err != nil || ok {
		return err
	}
	_, err := s.pool.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{s.slot()}.Sanitize()+" FOR TABLE "+s.Core.Name("outbox")+
		" WITH (publish = 'insert')")
	if pgCode(err) == "42710" { // created meanwhile
		return nil
	}
	return err
}

// OutboxStreamStatus implements store.Streamer.
func (s *driver) OutboxStreamStatus(ctx context.Context) (store.OutboxStreamStatus, error) {
	st := store.OutboxStreamStatus{Slot: s.slot(), Publication: s.slot()}
	var lagSec float64
	var walStatus *string
	err := s.pool.QueryRow(ctx, `SELECT s.active, s.wal_status,
			COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn), 0)::bigint,
			COALESCE(EXTRACT(EPOCH FROM r.flush_lag), 0)::float8
		FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, s.slot()).Scan(&st.Active, &walStatus, &st.LagBytes, &lagSec)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Exists = true
	if walStatus != nil {
		st.WALStatus = *walStatus
	}
	st.LagAge = time.Duration(lagSec * float64(time.Second))
	return st, nil
}

// stream is an open outbox stream.
type stream struct {
	d     *driver
	conn  *pgconn.PgConn
	fresh bool
	rel   map[uint32]*pglogrepl.RelationMessage

	confirmed atomic.Uint64 // Confirm's position
	reported  uint64        // the position last reported
	lastSent  time.Time
	rows      []store.OutboxRow // the current transaction's rows
}

func (st *stream) Fresh() bool { return st.fresh }

func (st *stream) Confirm(pos uint64) {
	for {
		old := st.confirmed.Load()
		if pos <= old || st.confirmed.CompareAndSwap(old, pos) {
			return
		}
	}
}

// report sends the confirmed position when it moved (at most every
// statusEvery), when the server asks, or every standbyTimeout.
func (st *stream) report(ctx context.Context, asked bool) error {
	pos := st.confirmed.Load()
	now := time.Now()
	if !asked && now.Sub(st.lastSent) < standbyTimeout && (pos == st.reported || now.Sub(st.lastSent) < statusEvery) {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, st.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(pos)}); err != nil {
		return err
	}
	st.reported, st.lastSent = pos, now
	return nil
}

func (st *stream) Recv(ctx context.Context) (store.StreamEvent, error) {
	for {
		if err := st.report(ctx, false); err != nil {
			return store.StreamEvent{}, err
		}
		rctx, cancel := context.WithTimeout(ctx, statusEvery)
		msg, err := st.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && pgconn.Timeout(err) {
				continue
			}
			return store.StreamEvent{}, err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return store.StreamEvent{}, pgconn.ErrorResponseToPgError(m)
		case *pgproto3.CopyData:
			ev, ok, err := st.copyData(ctx, m.Data)
			if err != nil || ok {
				return ev, err
			}
		default:
			return store.StreamEvent{}, fmt.Errorf("unexpected message %T", msg)
		}
	}
}

// copyData handles one message of the replication stream; ok reports an
// event to return.
func (st *stream) copyData(ctx context.Context, data []byte) (ev store.StreamEvent, ok bool, err error) {
	if len(data) == 0 {
		return ev, false, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return ev, false, err
		}
		if k.ReplyRequested {
			if err := st.report(ctx, true); err != nil {
				return ev, false, err
			}
		}
		return store.StreamEvent{Pos: uint64(k.ServerWALEnd)}, true, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return ev, false, err
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return ev, false, err
		}
		switch m := m.(type) {
		case *pglogrepl.RelationMessage:
			st.rel[m.RelationID] = m
		case *pglogrepl.BeginMessage:
			st.rows = nil
		case *pglogrepl.InsertMessage:
			rel := st.rel[m.RelationID]
			if rel == nil {
				return ev, false, fmt.Errorf("insert into unknown relation %d", m.RelationID)
			}
			row, err := decodeRow(rel, m.Tuple)
			if err != nil {
				return ev, false, err
			}
			st.rows = append(st.rows, row)
		case *pglogrepl.CommitMessage:
			ev := store.StreamEvent{Pos: uint64(m.TransactionEndLSN), Rows: st.rows, CommitTime: m.CommitTime}
			st.rows = nil
			return ev, true, nil
		}
	}
	return ev, false, nil
}

func (st *stream) Publishable(ctx context.Context, rows []store.OutboxRow) ([]store.OutboxRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(rows))
	for i := range rows {
		ids[i] = rows[i].RowID
	}
	rs, err := st.d.pool.Query(ctx, st.d.streamSQL().publishable, ids)
	if err != nil {
		return nil, err
	}
	ok, err := pgx.CollectRows(rs, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	keep := make(map[int64]struct{}, len(ok))
	for _, id := range ok {
		keep[id] = struct{}{}
	}
	out := rows[:0:0]
	for _, r := range rows {
		if _, k := keep[r.RowID]; k {
			out = append(out, r)
		}
	}
	return out, nil
}

func (st *stream) Settle(ctx context.Context, sent []int64, failed []store.OutboxFailure, at time.Time) error {
	if len(sent) == 0 && len(failed) == 0 {
		return nil
	}
	q := st.d.streamSQL()
	if len(failed) == 0 {
		_, err := st.d.pool.Exec(ctx, q.settle, sent)
		return err
	}
	return pgx.BeginFunc(ctx, st.d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q.settle, sent); err != nil {
			return err
		}
		for _, stmt := range st.d.Outbox.FailStmts(failed, at) {
			if _, err := tx.Exec(ctx, stmt.SQL, stmt.Args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func (st *stream) Close(ctx context.Context) error {
	return st.conn.Close(ctx)
}

// streamQueries are the stream's statements on the table.
type streamQueries struct {
	publishable, settle string
}

func (s *driver) streamSQL() streamQueries {
	o := s.Core.Name("outbox")
	return streamQueries{
		// Still pending, and no earlier unsent row of the aggregate
		// outside the window (a failed or quarantined one, or one the
		// stream passed over: its later rows wait for claims).
		publishable: `SELECT r.id FROM ` + o + ` r WHERE r.id = ANY($1::bigint[]) AND r.state = 0
			AND NOT EXISTS (SELECT 1 FROM ` + o + ` e WHERE e.aggregate_id = r.aggregate_id AND e.sequence < r.sequence
				AND e.state IN (0, 2) AND e.id <> ALL($1::bigint[]))`,
		settle: `DELETE FROM ` + o + ` WHERE id = ANY($1::bigint[])`,
	}
}

// decodeRow decodes an inserted outbox row from pgoutput's text format.
func decodeRow(rel *pglogrepl.RelationMessage, t *pglogrepl.TupleData) (store.OutboxRow, error) {
	var r store.OutboxRow
	if t == nil || len(t.Columns) != len(rel.Columns) {
		return r, errors.New("outbox insert: the tuple does not match its relation")
	}
	var err error
	for i, c := range t.Columns {
		name := rel.Columns[i].Name
		if c.DataType == 'n' {
			continue
		}
		if c.DataType != 't' {
			return r, fmt.Errorf("outbox insert: column %s: data type %q", name, c.DataType)
		}
		v := string(c.Data)
		switch name {
		case "id":
			r.RowID, err = parseInt(v)
		case "message_id":
			r.ID = v
		case "aggregate_id":
			r.AggregateID = v
		case "version":
			r.Version, err = parseInt(v)
		case "sequence":
			r.Sequence, err = parseInt(v)
		case "type":
			r.Type = v
		case "headers":
			r.Headers, err = parseHeaders(v)
		case "payload":
			r.Payload, err = parseBytea(v)
		case "state":
			var n int64
			n, err = parseInt(v)
			r.State = store.OutboxState(n)
		case "attempts":
			var n int64
			n, err = parseInt(v)
			r.Attempts = int(n)
		case "created_at":
			r.CreatedAt, err = parseTime(v)
		case "next_attempt":
			r.NextAttempt, err = parseTime(v)
		case "last_error":
			r.LastError = v
		case "sent_at":
			r.SentAt, err = parseTime(v)
		}
		if err != nil {
			return r, fmt.Errorf("outbox insert: column %s: %w", name, err)
		}
	}
	if r.RowID == 0 || r.AggregateID == "" || strings.TrimSpace(r.ID) == "" {
		return r, errors.New("outbox insert: a row without its ID, message ID or aggregate ID")
	}
	return r, nil
}
