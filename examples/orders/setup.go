package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/kafka" // registers kafka://
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/drivers/rabbit"     // registers rabbit://, amqp://, amqps://
	"github.com/wary-go/wary/drivers/servicebus" // registers servicebus://
	"github.com/wary-go/wary/drivers/sqsfifo"    // registers sqsfifo://
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/idem/store"
)

// shop is the example's database: the store, and the domain SQL on it
// (written with $1 placeholders).
type shop[Tx any] struct {
	name  string
	store store.Provider[Tx]
	// inTx runs f in a transaction of the database and commits it.
	inTx func(ctx context.Context, f func(tx Tx) error) error
	exec func(ctx context.Context, tx Tx, q string, args ...any) error
	// column reads one text column of every row q returns.
	column func(ctx context.Context, q string) ([]string, error)
	close  func()
}

func newSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// execSQLite runs q, written with $1 placeholders, in tx.
func execSQLite(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	_, err := tx.ExecContext(ctx, placeholder.ReplaceAllString(q, "?$1"), args...)
	return err
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
		exec: execSQLite,
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

// openPostgres opens a store in a fresh schema of the database at
// rawURL, dropped at close.
func openPostgres(ctx context.Context, rawURL string) (*shop[pgx.Tx], error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	schema := "wary_orders_" + newSuffix()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		admin.Close(context.WithoutCancel(ctx))
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, err
	}
	store, err := postgres.New(ctx, pool, nil)
	if err != nil {
		pool.Close()
		drop()
		return nil, err
	}
	host := cfg.ConnConfig.Host
	return &shop[pgx.Tx]{
		name:  fmt.Sprintf("PostgreSQL (%s:%d/%s, schema %s)", host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, schema),
		store: store,
		inTx: func(ctx context.Context, f func(tx pgx.Tx) error) error {
			return pgx.BeginFunc(ctx, pool, f)
		},
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		column: func(ctx context.Context, q string) ([]string, error) {
			rows, err := pool.Query(ctx, q)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[string])
		},
		close: func() { pool.Close(); drop() },
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
	br := &brokers{name: broker.Redact(u), close: func() {
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
	case rabbit.Scheme, rabbit.SchemeAMQP, rabbit.SchemeAMQPS:
		server, exchange := os.Getenv(rabbit.ServerURLEnv), u.Host+strings.TrimSuffix(u.Path, "/")
		if u.Scheme != rabbit.Scheme {
			s := *u
			s.RawQuery = ""
			server, exchange = s.String(), u.Query().Get("exchange")
		}
		if server == "" || exchange == "" {
			br.close()
			return nil, fmt.Errorf("-broker %s: want rabbit://EXCHANGE with %s set, or amqp://USER:PASS@HOST:PORT/?exchange=EXCHANGE", br.name, rabbit.ServerURLEnv)
		}
		conn, err := rabbit.Dial(ctx, server, nil)
		if err != nil {
			br.close()
			return nil, err
		}
		closers = append(closers, func() { conn.Close() })
		topo := rabbit.Topology{Exchange: exchange, Queue: exchange + ".billing"}
		_ = topo.Delete(ctx, conn) // what an earlier run left
		if err := rabbit.Declare(ctx, conn, topo); err != nil {
			br.close()
			return nil, err
		}
		closers = append(closers, func() { _ = topo.Delete(context.WithoutCancel(ctx), conn) })
		if subURL == "" {
			s := *u
			if u.Scheme == rabbit.Scheme {
				s.Host, s.Path, s.RawQuery = topo.Queue, "", "nack_delay=true"
			} else {
				s.RawQuery = url.Values{"queue": {topo.Queue}, "nack_delay": {"true"}}.Encode()
			}
			subURL = s.String()
		}
	case "kafka":
		if subURL == "" {
			q := u.Query()
			q.Set("topic", u.Host+strings.TrimPrefix(u.Path, "/"))
			s := url.URL{Scheme: u.Scheme, Host: "billing", RawQuery: q.Encode()}
			subURL = s.String()
		}
	case sqsfifo.Scheme, servicebus.Scheme:
		if subURL == "" {
			subURL = topicURL // one queue: the topic and the subscription
		}
	default:
		if subURL == "" {
			br.close()
			return nil, fmt.Errorf("-broker %s: give the subscription with -subscription", br.name)
		}
	}
	if br.topic, err = mux.OpenTopic(ctx, topicURL); err != nil {
		br.close()
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
