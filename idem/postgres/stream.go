package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/wary-go/wary/idem/internal/seam"
	"github.com/wary-go/wary/idem/outbox"
)

// ErrStreamHeld is returned while another relay holds the outbox stream:
// this relay stands by.
var ErrStreamHeld = errors.New("idem/postgres: another relay holds the outbox stream")

// ErrStreamUnavailable is returned when the server cannot stream the
// outbox (wrapped with what is missing).
var ErrStreamUnavailable = errors.New("idem/postgres: the outbox stream is unavailable")

// The outbox stream (a relay on a store with SourceOptions.Stream; the
// source that publishes it is in stream_source.go):
// logical replication of the outbox table's inserts, from a slot with the
// pgoutput plugin and a publication on the table (publish = 'insert';
// publish_via_partition_root, from when the outbox was partitioned,
// migrations 010 to 014; a sliced outbox's rotation adds each new current
// table to it),
// both named like the outbox's notification channel (Store.StreamSlot).
// A relay opens a replication connection (the pool's configuration with
// replication=database), creates the publication and the slot if they
// are missing (or the slot was invalidated: wal_status lost), and streams
// from the slot's confirmed position. The table stays the source of
// truth: a window of streamed rows is published only if its rows are
// still pending there (Publishable), published rows are deleted in one
// statement (Settle), and only then is the slot confirmed past them.

// statusEvery is how often the stream reports its position to the server
// at most, and standbyTimeout how often at least; idlePing how often it
// asks for the server's position at most while nothing comes (ping).
const (
	statusEvery    = 50 * time.Millisecond
	standbyTimeout = 10 * time.Second
	idlePing       = time.Second
)

// StreamSlot returns the name of the outbox stream's replication slot and
// publication (one name for both): "wary_outbox_" and a hash of the
// database's and the outbox table's qualified names (slot names are
// unique across the server's databases).
func (s *Store) StreamSlot(ctx context.Context) (string, error) { return s.d.slotName(ctx) }

// CheckStream reports what the server lacks for the outbox stream
// (wal_level, a free replication slot, the REPLICATION attribute), one
// error per missing thing, or nil.
func (s *Store) CheckStream(ctx context.Context) error { return s.d.checkStream(ctx) }

func (s *driver) checkStream(ctx context.Context) error {
	slot, err := s.slotName(ctx)
	if err != nil {
		return unavailable(err, "")
	}
	var level, user string
	var repl, exists bool
	var slots, used int
	err = s.pool.QueryRow(ctx, `SELECT current_setting('wal_level'), current_user,
		(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user),
		current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_replication_slots),
		EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).
		Scan(&level, &user, &repl, &slots, &used, &exists)
	if err != nil {
		return unavailable(err, "")
	}
	var missing []error
	if level != "logical" {
		missing = append(missing, fmt.Errorf("%w: wal_level is %s, not logical (ALTER SYSTEM SET wal_level = logical, then restart the server)",
			ErrStreamUnavailable, level))
	}
	if !exists && used >= slots {
		missing = append(missing, fmt.Errorf("%w: max_replication_slots is %d and all are in use (raise it, then restart the server)",
			ErrStreamUnavailable, slots))
	}
	if !repl {
		missing = append(missing, fmt.Errorf("%w: role %s has no REPLICATION attribute (ALTER ROLE %s REPLICATION)",
			ErrStreamUnavailable, user, pgx.Identifier{user}.Sanitize()))
	}
	return errors.Join(missing...)
}

// openStream opens the stream for owner, creating what it needs on the
// server (a publication, a slot). It fails with an error matching
// ErrStreamHeld while another relay holds the stream, and with one
// matching ErrStreamUnavailable when the server cannot stream (the
// error says exactly what is missing): the source then polls the table.
// Any other error says the server is out of reach for now (a restart), or
// the slot vanished while it was opened: the source opens it again soon.
func (s *driver) openStream(ctx context.Context, owner string) (logStream, error) {
	if err := s.checkStream(ctx); err != nil {
		return nil, err
	}
	slot, _ := s.slotName(ctx) // known once checkStream passed
	if err := s.ensurePublication(ctx, slot); err != nil {
		return nil, unavailable(err, "publication")
	}
	var active bool
	var walStatus *string
	err := s.pool.QueryRow(ctx, `SELECT active, wal_status FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active, &walStatus)
	create := errors.Is(err, pgx.ErrNoRows)
	switch {
	case create:
	case err != nil:
		return nil, unavailable(err, "")
	case active:
		return nil, ErrStreamHeld
	case walStatus != nil && *walStatus == "lost":
		// Invalidated (max_slot_wal_keep_size): it can stream nothing
		// again. Rows committed since are in the table.
		if _, err := s.pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			return nil, unavailable(err, "drop the invalidated slot")
		}
		create = true
	}
	cfg := s.pool.Config().ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "wary relay " + owner
	for k, v := range streamParams {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, unavailable(err, "replication connection")
	}
	st := &stream{d: s, conn: conn, rel: map[uint32]*pglogrepl.RelationMessage{}, slot: slot}
	// Rows committed before the slot are in no stream: the relay drains
	// them from the table first, after creating the slot and after opening
	// one whose creator stopped before it drained them (Drained not
	// called; recorded as not drained before the slot is created, so that
	// a relay stopping between the two leaves no slot marked drained).
	slots := s.Core.Name("outbox_stream")
	if create {
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+slots+` (slot, drained) VALUES ($1, FALSE)
			ON CONFLICT (slot) DO UPDATE SET drained = FALSE`, slot); err != nil {
			closeConn(ctx, conn)
			return nil, unavailable(err, "record the slot")
		}
	} else {
		var drained bool
		err := s.pool.QueryRow(ctx, `SELECT drained FROM `+slots+` WHERE slot = $1`, slot).Scan(&drained)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			closeConn(ctx, conn)
			return nil, unavailable(err, "read the slot's record")
		}
		st.fresh = !drained // no record: a slot of an earlier version, drained once more
	}
	if create {
		_, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			closeConn(ctx, conn)
			if pgCode(err) == "42710" { // another relay created it
				return nil, ErrStreamHeld
			}
			return nil, unavailable(err, "create slot")
		}
		st.fresh = true
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + slot + "'"}})
	if err != nil {
		closeConn(ctx, conn)
		switch pgCode(err) {
		case "55006": // object in use: another relay streams from the slot
			return nil, ErrStreamHeld
		case "42704":
			// The slot was dropped meanwhile: not a server that cannot
			// stream (the relay would poll for StreamRetry), one to open
			// again at once, creating the slot.
			return nil, fmt.Errorf("idem/postgres: outbox stream: the slot vanished: %w", err)
		}
		return nil, unavailable(err, "start replication")
	}
	return st, nil
}

// closeConn closes the replication connection of a stream that failed to
// open, although ctx ended, within seam.DetachTimeout.
func closeConn(ctx context.Context, conn *pgconn.PgConn) {
	cctx, cancel := seam.Detach(ctx)
	defer cancel()
	_ = conn.Close(cctx)
}

// unavailable is err, opening the stream (after what), as an error
// matching ErrStreamUnavailable: the relay polls the table, and
// tries the stream again after its StreamRetry. Unless the server is only
// out of reach (unreachable): the relay then opens the stream again after
// its PollInterval (the table cannot be polled either).
func unavailable(err error, what string) error {
	if what != "" {
		err = fmt.Errorf("%s: %w", what, err)
	}
	if unreachable(err) {
		return fmt.Errorf("idem/postgres: outbox stream: the server is out of reach: %w", err)
	}
	return fmt.Errorf("%w: %w", ErrStreamUnavailable, err)
}

// unreachable reports whether err says that the server is out of reach
// for now rather than unable to stream: it is shutting down, starting or
// recovering (SQLSTATE class 57P), or a connection failed without the
// server's word (refused, reset, closed: a restart).
func unreachable(err error) bool {
	if code := pgCode(err); code != "" {
		return strings.HasPrefix(code, "57P")
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// ensurePublication creates the stream's publication on the outbox table,
// or makes an existing one publish it (migration 015 and the rotations of
// a sliced outbox keep it there).
func (s *driver) ensurePublication(ctx context.Context, slot string) error {
	// From PostgreSQL 15 on, the publication carries only the columns a
	// relay reads (streamColumns): the others hold their defaults at
	// insert, and each column streamed costs the server's sender its
	// output function. A publication of fewer columns (before claims_only
	// was streamed) is set again.
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return err
	}
	columns := "TRUE"
	if version >= 150000 {
		columns = `(r.prattrs IS NULL OR (SELECT attnum FROM pg_attribute
			WHERE attrelid = r.prrelid AND attname = 'claims_only') = ANY (r.prattrs))`
	}
	var exists, ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
		EXISTS (SELECT 1 FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid
			WHERE p.pubname = $1 AND p.pubviaroot AND r.prrelid = $2::regclass AND `+columns+`)`, slot, s.Core.Name("outbox")).Scan(&exists, &ok)
	if err != nil || ok {
		return err
	}
	table := s.Core.Name("outbox")
	if version >= 150000 {
		table += " (" + streamColumns + ")"
	}
	pub := pgx.Identifier{slot}.Sanitize()
	if exists {
		if _, err := s.pool.Exec(ctx, "ALTER PUBLICATION "+pub+" SET TABLE "+table); err != nil {
			return err
		}
		_, err := s.pool.Exec(ctx, "ALTER PUBLICATION "+pub+" SET (publish = 'insert', publish_via_partition_root = true)")
		return err
	}
	_, err = s.pool.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+table+
		" WITH (publish = 'insert', publish_via_partition_root = true)")
	if pgCode(err) == "42710" { // created meanwhile
		return nil
	}
	return err
}

// streamColumns are the outbox columns the publication streams (on
// PostgreSQL 15 and later; before, all of them). A row inserted has state
// pending, no attempts, no error and no sent time; claims_only is set on
// the rows a rotation moves (decodeRow's left).
const streamColumns = "id, message_id, aggregate_id, version, sequence, type, headers, payload, created_at, claims_only"

// defaultWALBudget is SourceOptions.WALBudget's default.
const defaultWALBudget = 1 << 30

// releaseOverBudget drops the stream's slot if no relay streams from it
// and it retains more than budget bytes of log beyond its confirmed
// position (OutboxStreamStatus.LagBytes), and records the release. It
// reports the log the slot retained, and whether it dropped it. Rows
// committed since the slot's confirmed position are in the table: the
// relay polls them, and the next slot is fresh (drained from the table).
func (s *driver) releaseOverBudget(ctx context.Context, budget int64) (lag int64, released bool, err error) {
	st, err := s.OutboxStreamStatus(ctx)
	if err != nil || !st.Exists || st.Active || st.LagBytes <= budget {
		return st.LagBytes, false, err
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, st.Slot); err != nil {
		switch pgCode(err) {
		case "55006", "42704": // a relay took it meanwhile, or dropped it
			return st.LagBytes, false, nil
		}
		return st.LagBytes, false, fmt.Errorf("drop the slot over the WAL budget: %w", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO `+s.Core.Name("outbox_stream")+` AS r (slot, drained, released, released_at, released_lag)
		VALUES ($1, FALSE, 1, now(), $2)
		ON CONFLICT (slot) DO UPDATE SET drained = FALSE, released = r.released + 1, released_at = now(), released_lag = $2`, st.Slot, st.LagBytes)
	if err != nil {
		return st.LagBytes, true, fmt.Errorf("record the release of the slot over the WAL budget: %w", err)
	}
	return st.LagBytes, true, nil
}

// stream is an open outbox stream.
type stream struct {
	d     *driver
	conn  *pgconn.PgConn
	fresh bool
	slot  string
	rel   map[uint32]*pglogrepl.RelationMessage

	confirmed atomic.Uint64 // Confirm's position
	reported  uint64        // the position last reported
	lastSent  time.Time
	lastPing  time.Time    // ping's last request
	rows      []outbox.Row // the current transaction's rows
	cols      []tupleCol   // parseInsert's columns, reused
	lastRows  int          // how many rows the last transaction had (rows' first capacity)
	left      bool         // one of them may be held back by the table (decodeRow)

	rctx, rparent context.Context // Recv's timeout, and the context it was made from
	rcancel       context.CancelFunc
}

func (st *stream) Fresh() bool { return st.fresh }

func (st *stream) Drained(ctx context.Context) error {
	_, err := st.d.pool.Exec(ctx, `INSERT INTO `+st.d.Core.Name("outbox_stream")+` (slot, drained) VALUES ($1, TRUE)
		ON CONFLICT (slot) DO UPDATE SET drained = TRUE`, st.slot)
	return err
}

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
	now := time.Now()
	if !asked && now.Sub(st.lastSent) < standbyTimeout && (st.confirmed.Load() == st.reported || now.Sub(st.lastSent) < statusEvery) {
		return nil
	}
	return st.sendStatus(ctx, false)
}

// sendStatus sends the confirmed position to the server; reply asks it
// for a keepalive back.
func (st *stream) sendStatus(ctx context.Context, reply bool) error {
	pos, now := st.confirmed.Load(), time.Now()
	err := pglogrepl.SendStandbyStatusUpdate(ctx, st.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(pos), ReplyRequested: reply})
	if err != nil {
		return err
	}
	st.reported, st.lastSent = pos, now
	if reply {
		st.lastPing = now
	}
	return nil
}

// maxRowsHint bounds the capacity a transaction's rows start with, so
// that one large transaction does not size every later one.
const maxRowsHint = 1024

func (st *stream) Recv(ctx context.Context) (streamEvent, error) {
	for {
		if err := st.report(ctx, false); err != nil {
			return streamEvent{}, err
		}
		msg, err := st.conn.ReceiveMessage(st.timeout(ctx))
		if err != nil {
			if ctx.Err() == nil && pgconn.Timeout(err) {
				st.rcancel()
				st.rctx = nil
				if err := st.ping(ctx); err != nil {
					return streamEvent{}, err
				}
				continue
			}
			return streamEvent{}, err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return streamEvent{}, pgconn.ErrorResponseToPgError(m)
		case *pgproto3.CopyData:
			ev, ok, err := st.copyData(ctx, m.Data)
			if err != nil || ok {
				return ev, err
			}
		default:
			return streamEvent{}, fmt.Errorf("unexpected message %T", msg)
		}
	}
}

// ping asks the server, at most every idlePing, for a keepalive (its
// log's end) while nothing comes: the relay confirms an idle outbox's
// position with it, and so learns that every commit before it was
// streamed (its sweeps' horizon; without it, the server's own keepalive
// comes every wal_sender_timeout / 2, 30 s by default).
func (st *stream) ping(ctx context.Context) error {
	if time.Since(st.lastPing) < idlePing {
		return nil
	}
	return st.sendStatus(ctx, true)
}

// timeout returns a context that ends statusEvery after it was made (so
// that Recv reports the position while no message comes), made again
// once it ended or ctx changed: one per message would cost a timer each.
func (st *stream) timeout(ctx context.Context) context.Context {
	if st.rctx != nil && (st.rparent != ctx || st.rctx.Err() != nil) {
		st.rcancel()
		st.rctx = nil
	}
	if st.rctx == nil {
		st.rctx, st.rcancel = context.WithTimeout(ctx, statusEvery)
		st.rparent = ctx
	}
	return st.rctx
}

// copyData handles one message of the replication stream; ok reports an
// event to return.
func (st *stream) copyData(ctx context.Context, data []byte) (ev streamEvent, ok bool, err error) {
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
		return streamEvent{Pos: uint64(k.ServerWALEnd)}, true, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return ev, false, err
		}
		if len(x.WALData) > 0 && x.WALData[0] == 'I' {
			// Inserts, one per row, are read without pglogrepl's
			// allocations (parseInsert).
			return ev, false, st.insert(x.WALData)
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return ev, false, err
		}
		switch m := m.(type) {
		case *pglogrepl.RelationMessage:
			st.rel[m.RelationID] = m
		case *pglogrepl.BeginMessage:
			st.rows, st.left = nil, false
		case *pglogrepl.CommitMessage:
			ev := streamEvent{Pos: uint64(m.TransactionEndLSN), Rows: st.rows, Time: m.CommitTime, Left: st.left}
			st.lastRows = len(st.rows)
			st.rows, st.left = nil, false
			return ev, true, nil
		}
	}
	return ev, false, nil
}

// insert takes a streamed insert (WAL data starting with 'I') into the
// transaction's rows.
func (st *stream) insert(data []byte) error {
	id, cols, err := parseInsert(data, st.cols)
	st.cols = cols
	if err != nil {
		return err
	}
	rel := st.rel[id]
	if rel == nil {
		return fmt.Errorf("insert into unknown relation %d", id)
	}
	row, left, err := decodeRow(rel, cols)
	clear(st.cols) // nothing of the message is kept past it
	if err != nil {
		return err
	}
	if st.rows == nil {
		// Sized as the last transaction was (producers tend to write
		// alike), rather than grown by doubling.
		st.rows = make([]outbox.Row, 0, min(max(st.lastRows, 1), maxRowsHint))
	}
	st.rows = append(st.rows, row)
	st.left = st.left || left
	return nil
}

// Close reports the position last confirmed (so that the next stream
// does not send again what this one settled since its last report), then
// closes the connection. A connection that failed (the server restarted)
// is closed already, by a goroutine of its own that writes to it: nothing
// is sent on it.
func (st *stream) Close(ctx context.Context) error {
	if st.rctx != nil {
		st.rcancel()
	}
	if pos := st.confirmed.Load(); pos > st.reported && !st.conn.IsClosed() {
		_ = pglogrepl.SendStandbyStatusUpdate(ctx, st.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(pos)})
	}
	return st.conn.Close(ctx)
}
