// Package walraw is the benchmarks' "decode + raw" contender: the most a
// relay that reads an outbox from PostgreSQL's log can do on a machine. A
// Publisher reads a logical replication stream (pgoutput, protocol 1) of
// a publication of wary's outbox table and publishes each inserted row's
// message ID and payload raw with amqp091-go, 256 confirms in flight on
// one channel. No table work, no headers, no order kept per aggregate
// beyond the log's, no retries: any error ends it.
//
// idem/postgres's BenchmarkRelayRabbit drains a backlog with it, and
// bench/peers runs it end to end beside the relays.
package walraw

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	amqp "github.com/rabbitmq/amqp091-go"
)

// InFlight is how many publishes wait for their confirms at most.
const InFlight = 256

// Publisher publishes streamed rows on one confirm channel.
type Publisher struct {
	ch       *amqp.Channel
	confirms <-chan amqp.Confirmation
	exchange string
}

// NewPublisher publishes on ch, which must be in confirm mode, to
// exchange; confirms is ch's NotifyPublish channel (buffered, InFlight),
// which only the Publisher reads while it relays.
func NewPublisher(ch *amqp.Channel, confirms <-chan amqp.Confirmation, exchange string) *Publisher {
	return &Publisher{ch: ch, confirms: confirms, exchange: exchange}
}

// Relay reads conn's replication stream (started on a publication of
// wary's outbox) until n inserted rows were published and confirmed, and
// returns the end of the commit of the last: the position to confirm.
func (p *Publisher) Relay(ctx context.Context, conn *pgconn.PgConn, n int) (pglogrepl.LSN, error) {
	r := NewReader(conn)
	var end pglogrepl.LSN
	out, sent := 0, 0
	for sent < n || end == 0 {
		ev, err := r.Next(ctx)
		if err != nil {
			return 0, err
		}
		if ev.Commit {
			if sent == n {
				end = ev.End
			}
			continue
		}
		if out == InFlight {
			if err := p.confirm(ctx); err != nil {
				return 0, err
			}
			out--
		}
		if err := p.ch.PublishWithContext(ctx, p.exchange, "", false, false, amqp.Publishing{
			MessageId: ev.ID, Body: ev.Payload, DeliveryMode: amqp.Persistent}); err != nil {
			return 0, err
		}
		out++
		sent++
	}
	for ; out > 0; out-- {
		if err := p.confirm(ctx); err != nil {
			return 0, err
		}
	}
	return end, nil
}

// confirm waits for the next confirmation, an ack.
func (p *Publisher) confirm(ctx context.Context) error {
	select {
	case c, ok := <-p.confirms:
		if !ok || !c.Ack {
			return errors.New("walraw: publish not confirmed")
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Event is what Reader.Next reads: an inserted row (its message ID and
// payload), or the commit of its transaction.
type Event struct {
	ID      string
	Payload []byte
	Commit  bool          // a commit, not a row
	End     pglogrepl.LSN // the commit's end (Commit)
}

// Reader decodes a replication stream of a publication of wary's outbox.
type Reader struct {
	conn              *pgconn.PgConn
	idCol, payloadCol int
}

// NewReader reads conn, whose replication was started (pgoutput,
// protocol 1).
func NewReader(conn *pgconn.PgConn) *Reader { return &Reader{conn: conn, idCol: -1, payloadCol: -1} }

// Next returns the stream's next inserted row or commit.
func (r *Reader) Next(ctx context.Context) (Event, error) {
	for {
		msg, err := r.conn.ReceiveMessage(ctx)
		if err != nil {
			return Event{}, err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		x, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			return Event{}, err
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return Event{}, err
		}
		switch m := m.(type) {
		case *pglogrepl.RelationMessage:
			for i, c := range m.Columns {
				switch c.Name {
				case "message_id":
					r.idCol = i
				case "payload":
					r.payloadCol = i
				}
			}
		case *pglogrepl.InsertMessage:
			if r.idCol < 0 || r.payloadCol < 0 || max(r.idCol, r.payloadCol) >= len(m.Tuple.Columns) {
				return Event{}, fmt.Errorf("walraw: insert into relation %d without message_id and payload", m.RelationID)
			}
			body, err := hex.DecodeString(strings.TrimPrefix(string(m.Tuple.Columns[r.payloadCol].Data), `\x`))
			if err != nil {
				return Event{}, fmt.Errorf("walraw: payload: %w", err)
			}
			return Event{ID: string(m.Tuple.Columns[r.idCol].Data), Payload: body}, nil
		case *pglogrepl.CommitMessage:
			return Event{Commit: true, End: m.TransactionEndLSN}, nil
		}
	}
}
