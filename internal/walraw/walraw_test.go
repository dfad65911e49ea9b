package walraw_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/internal/servicetest"
	"github.com/wary-go/wary/internal/walraw"
)

// TestRelay: the rows a publication's transactions insert arrive on the
// exchange, each its message ID and payload, and only those; Relay
// returns the end of the last one's commit.
func TestRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pgURL := servicetest.URL(t, "WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, u string) error {
		c, err := pgx.Connect(ctx, u)
		if err == nil {
			c.Close(ctx)
		}
		return err
	})
	amqpURL := servicetest.URL(t, "WARY_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, u string) error {
		c, err := amqp.Dial(u)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	db, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	var level string
	if err := db.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("wal_level is %s, not logical", level)
		}
		t.Skipf("wal_level is %s, not logical (WARY_REQUIRE_SERVICES=1 to fail)", level)
	}
	name := fmt.Sprintf("walraw_%d", time.Now().UnixNano())
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id bigserial PRIMARY KEY, message_id text, payload bytea);"+
		"CREATE TABLE "+name+"_other (message_id text, payload bytea);"+
		"CREATE PUBLICATION "+name+" FOR TABLE "+name+" WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, pgURL)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP PUBLICATION "+name+"; DROP TABLE "+name+", "+name+"_other")
	})

	ac, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	ch, err := ac.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(name, "fanout", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "", name, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pch, err := ac.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := pch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	p := walraw.NewPublisher(pch, pch.NotifyPublish(make(chan amqp.Confirmation, walraw.InFlight)), name)

	cfg, err := pgconn.ParseConfig(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, name, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, name, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + name + "'"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "INSERT INTO "+name+"_other VALUES ('other', 'x')"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" (message_id, payload) VALUES ('a', '\\x01ff'), ('b', '')"); err != nil {
		t.Fatal(err)
	}
	var last pglogrepl.LSN
	if err := db.QueryRow(ctx, "INSERT INTO "+name+" (message_id, payload) VALUES ('c', 'hello') RETURNING pg_current_wal_insert_lsn()").Scan(&last); err != nil {
		t.Fatal(err)
	}
	end, err := p.Relay(ctx, conn, 3)
	if err != nil {
		t.Fatal(err)
	}
	if end <= last {
		t.Errorf("Relay returned %s, not past the last insert's %s", end, last)
	}
	want := map[string][]byte{"a": {0x01, 0xff}, "b": {}, "c": []byte("hello")}
	for range 3 {
		select {
		case d := <-deliveries:
			body, ok := want[d.MessageId]
			if !ok || !slices.Equal(body, d.Body) {
				t.Errorf("got message %q %x, want one of %v", d.MessageId, d.Body, want)
			}
			delete(want, d.MessageId)
		case <-ctx.Done():
			t.Fatalf("messages %v never arrived", want)
		}
	}
}
