package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/redact"
)

// shop is the example's database: the store, and the domain SQL on it
// (written with $1 placeholders).
type shop[Tx any] struct {
	name  string
	store idem.Store[Tx]
	// inTx runs f in a transaction of the database and commits it.
	inTx func(ctx context.Context, f func(tx Tx) error) error
	exec func(ctx context.Context, tx Tx, q string, args ...any) error
	// billing is the billing consumer's handler on this database.
	billing func(payments *keys.Caller[Tx]) idem.Handler[Tx]
	// column reads one text column of every row q returns.
	column func(ctx context.Context, q string) ([]string, error)
	close  func()
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// execSQLite runs q, written with $1 placeholders, in tx.
func execSQLite(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	_, err := tx.ExecContext(ctx, placeholder.ReplaceAllString(q, "?$1"), args...)
	return err
}

// billingSQLite is the billing consumer's handler on SQLite: the event,
// typed (JSON, the default codec: a body that does not decode never
// reaches the handler and is dead-lettered, or parked, with the reason,
// never retried), its effect recorded and the order's status kept through
// tx, the payment of a confirmed order staged in tx.
func billingSQLite(payments *keys.Caller[*sql.Tx]) idem.Handler[*sql.Tx] {
	return idem.Typed(nil, func(ctx context.Context, tx *sql.Tx, d *broker.Delivery, order OrderEvent) error {
		ev, err := idem.ParseEvent(d.Message) // the version check read it already, so it parses
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO billing_effects (message_id) VALUES (?)`, d.Message.ID); err != nil {
			return err
		}
		status := strings.TrimPrefix(ev.Type, "order.")
		if ev.Version == 1 {
			_, err := tx.ExecContext(ctx, `INSERT INTO billing_orders (id, version, status) VALUES (?, 1, ?)`, ev.AggregateID, status)
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE billing_orders SET status = ? WHERE id = ?`, status, ev.AggregateID); err != nil {
			return err
		}
		if status == "confirmed" {
			key, charge := billingPayment(ev, order)
			_, err := payments.Stage(ctx, tx, key, charge)
			return err
		}
		return nil
	})
}

// openSQLite opens a fresh SQLite database in a temporary directory.
func openSQLite(ctx context.Context) (*shop[*sql.Tx], error) {
	dir, err := os.MkdirTemp("", "wary-orders")
	if err != nil {
		return nil, err
	}
	store, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db"), nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	db := store.DB()
	return &shop[*sql.Tx]{
		name:  "SQLite (embedded, a temporary file)",
		store: store,
		inTx: func(ctx context.Context, f func(tx *sql.Tx) error) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := f(tx); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		},
		exec:    execSQLite,
		billing: billingSQLite,
		column: func(ctx context.Context, q string) ([]string, error) {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, rows.Err()
		},
		close: func() { store.Close(); os.RemoveAll(dir) },
	}, nil
}

// brokers are the topic the relay publishes to and the billing
// subscription on it.
type brokers struct {
	name  string
	topic *broker.Topic
	sub   *broker.Subscription
	close func()
	// settle is Config.SettleTimeout.
	settle time.Duration
}

// openBroker opens the topic at topicURL and the billing subscription on
// it (subURL, or one derived from topicURL):
//
//   - "" or mem://TOPIC?PARAMS: an in-memory broker of this run (Queue
//     profile unless PARAMS say otherwise), subscription mem://TOPIC/billing.
//
// Each scheme but mem:// needs its driver built in (tagOf):
//
//   - rabbit://EXCHANGE (server in WARY_RABBIT_URL) or
//     amqp://USER:PASS@HOST:PORT/VHOST?exchange=EXCHANGE: the exchange and
//     a queue EXCHANGE.billing are declared (after deleting what an earlier
//     run left) and deleted at close.
//   - kafka://TOPIC?brokers=HOST:PORT: consumer group billing.
//   - sqsfifo://QUEUE.fifo?region=REGION&endpoint=URL: the existing FIFO
//     queue, published to and consumed from (credentials from the AWS
//     SDK's default chain). Use a fresh queue for each run: SQS drops
//     messages whose IDs it saw in the last 5 minutes, and the run's IDs
//     are always the same.
//   - nats://HOST:PORT/STREAM?consumer=NAME&subject=SUBJECT: the existing
//     JetStream stream and its durable pull consumer (wary topology
//     --apply on the URL declares them), published to and consumed from.
//     Use a fresh stream for each run, or wait out its duplicate_window
//     (2 minutes by default): the run's IDs are always the same.
//   - gcppubsub://projects/PROJECT/topics/TOPIC (the emulator at
//     PUBSUB_EMULATOR_HOST, or Application Default Credentials): the
//     existing topic, consumed through the existing subscription
//     projects/PROJECT/subscriptions/billing (or -subscription).
//   - servicebus://QUEUE?PARAMS (connection string in
//     WARY_SERVICEBUS_CONNECTION_STRING): the existing queue, published to
//     and consumed from, its properties (sessions among them) read through
//     the administration API, which an emulator serves where
//     WARY_SERVICEBUS_ADMIN_ENDPOINT says. PARAMS as the servicebus
//     driver's URL opener takes them.
func openBroker(ctx context.Context, topicURL, subURL string) (*brokers, error) {
	if topicURL == "" {
		topicURL = "mem://orders"
	}
	u, err := url.Parse(topicURL)
	if err != nil {
		return nil, fmt.Errorf("-broker: %w", err)
	}
	closers := []func(){}
	br := &brokers{name: redact.URL(u), close: func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}}
	mux := broker.DefaultURLMux()
	switch u.Scheme {
	case memory.Scheme:
		// A broker of this run, not the process-wide default.
		b := memory.New(nil)
		closers = append(closers, func() { b.Close() })
		o := &memory.URLOpener{Broker: b}
		mux = new(broker.URLMux)
		mux.RegisterTopic(memory.Scheme, o)
		mux.RegisterSubscription(memory.Scheme, o)
		if subURL == "" {
			s := *u
			s.Path = "/billing"
			subURL = s.String()
		}
		br.name += " (embedded)"
	case "rabbit", "amqp", "amqps":
		sub, closer, err := openRabbit(ctx, u, subURL)
		if err != nil {
			br.close()
			return nil, err
		}
		closers, subURL = append(closers, closer), sub
	case "kafka":
		if subURL == "" {
			q := u.Query()
			q.Set("topic", u.Host+strings.TrimPrefix(u.Path, "/"))
			s := url.URL{Scheme: u.Scheme, Host: "billing", RawQuery: q.Encode()}
			subURL = s.String()
		}
	case "gcppubsub":
		if subURL == "" { // the project's subscription billing
			project, _, _ := strings.Cut(strings.TrimPrefix(u.Host+u.Path, "projects/"), "/")
			subURL = "gcppubsub://projects/" + project + "/subscriptions/billing"
		}
	case "sqsfifo", "servicebus", "nats":
		if subURL == "" {
			subURL = topicURL // one queue (a stream and its consumer): the topic and the subscription
		}
	default:
		if subURL == "" {
			br.close()
			return nil, fmt.Errorf("-broker %s: give the subscription with -subscription", br.name)
		}
	}
	if br.topic, err = mux.OpenTopic(ctx, topicURL); err != nil {
		br.close()
		if tag := tagOf(u.Scheme); tag != "" && errors.Is(err, broker.ErrInvalid) {
			// Most likely a driver this build left out.
			return nil, fmt.Errorf("%w (%w)", err, needsTag(tag, "-broker "+u.Scheme+"://…"))
		}
		return nil, err
	}
	closers = append(closers, func() { br.topic.Close() })
	if br.sub, err = mux.OpenSubscription(ctx, subURL); err != nil {
		br.close()
		return nil, err
	}
	closers = append(closers, func() { br.sub.Close() })
	return br, nil
}

// tagOf is the build tag under which the example builds in the driver of
// a URL scheme: "" for mem://, always built in. Everything beyond the
// embedded pair (SQLite and the memory broker) is built only under its
// tag, so that the default run compiles, and a fresh machine downloads,
// only what it runs.
func tagOf(scheme string) string {
	switch scheme {
	case "rabbit", "amqp", "amqps":
		return "rabbit"
	case "kafka", "sqsfifo", "servicebus", "nats", "gcppubsub":
		return scheme
	}
	return ""
}

// needsTag says that the flag of args (as "-broker kafka://…") is built
// in only under tag, and how to run the example with it.
func needsTag(tag, args string) error {
	return fmt.Errorf("%s is built in only with -tags %s: go -C examples run -tags %s ./orders %s", args, tag, tag, args)
}
