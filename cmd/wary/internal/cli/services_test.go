package cli_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/internal/servicetest"
)

// pgStore opens a store in a fresh schema, dropped at cleanup, and
// returns it with the flags that name it to wary.
func pgStore(t *testing.T) (*postgres.Store, []string) {
	url := servicetest.URL(t, cli.EnvPostgres, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, url string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := strings.ReplaceAll(unique("wary_cli"), "-", "_")
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st, []string{"--postgres", url, "--schema", schema}
}

// pgShop is st as the walkthroughs use a store.
func pgShop(st *postgres.Store) shopStore[pgx.Tx] {
	return shopStore[pgx.Tx]{store: st,
		newInbox: func(consumer string, caps capability.Subscription, o *idem.Options) (*idem.Inbox[pgx.Tx], error) {
			return idem.NewInbox(st, consumer, caps, o)
		},
		newOutbox: func() (*outbox.Outbox[pgx.Tx], error) { return outbox.New(st, nil) },
		newRelay: func(top *broker.Topic, o *outbox.RelayOptions) (*outbox.Relay, error) {
			return outbox.NewRelay(st, top, o)
		},
		inTx: func(ctx context.Context, f func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, st.Pool(), f) },
	}
}

// rabbitTopology declares an exchange and a quorum queue with a delivery
// limit and a dead-letter queue, deleted at cleanup, and returns the
// topic and subscription on them and the URLs wary opens them with.
func rabbitTopology(t *testing.T) (top *broker.Topic, topicURL string, sub *broker.Subscription, subURL string) {
	return rabbitTopologyNamed(t, unique("wary-cli"))
}

// rabbitTopologyNamed is rabbitTopology on the exchange name and the
// queue name.billing.
func rabbitTopologyNamed(t *testing.T, name string) (top *broker.Topic, topicURL string, sub *broker.Subscription, subURL string) {
	url := servicetest.URL(t, rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, url string) error {
		c, err := rabbit.Dial(ctx, url, nil)
		if err != nil {
			return err
		}
		return c.Close()
	})
	t.Setenv(rabbit.ServerURLEnv, url) // the driver reads it for rabbit:// URLs
	ctx := t.Context()
	conn, err := rabbit.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	topo := rabbit.Topology{Exchange: name, Queue: name + ".billing", DeliveryLimit: 5, DeadLetter: true}
	if err := rabbit.Declare(ctx, conn, topo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Delete(context.Background(), conn) })
	if top, err = rabbit.OpenTopic(ctx, conn, topo, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { top.Close() })
	if sub, err = rabbit.OpenSubscription(ctx, conn, topo, &rabbit.SubscriptionOptions{NackDelay: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	subURL = "rabbit://" + topo.Queue + "?delivery_limit=5&dead_letter_exchange=" + topo.DeadLetterExchange()
	return top, "rabbit://" + topo.Exchange, sub, subURL
}

func TestPostgresRabbitParked(t *testing.T) {
	st, args := pgStore(t)
	top, topicURL, sub, _ := rabbitTopology(t)
	parkedWalkthrough(t, newWary(t), &pipe[pgx.Tx]{store: pgShop(st), storeArgs: args, topicURL: topicURL, topic: top, sub: sub})
}

func TestPostgresOutbox(t *testing.T) {
	st, args := pgStore(t)
	outboxWalkthrough(t, newWary(t), &pipe[pgx.Tx]{store: pgShop(st), storeArgs: args})
}

func TestRabbitDLQ(t *testing.T) {
	top, topicURL, sub, subURL := rabbitTopology(t)
	dlqWalkthrough(t, newWary(t), top, topicURL, sub, subURL, "1s")
}

// TestRabbitDLQListsAll: `wary dlq list` holds every dead letter it reads
// until it puts them back, and shows all of them, more than a RabbitMQ
// subscription's default prefetch of 2, on every look.
func TestRabbitDLQListsAll(t *testing.T) {
	top, _, sub, subURL := rabbitTopology(t)
	ids := []string{unique("dead"), unique("dead"), unique("dead")}
	for _, id := range ids {
		publish(t, top, event(id, "order-"+id, 1))
	}
	for range ids {
		if err := receive(t, sub, 1)[0].DeadLetter(t.Context(), "poison: cannot parse"); err != nil {
			t.Fatal(err)
		}
	}
	w := newWary(t)
	for range 3 {
		w.want(cli.ExitFinding, "dlq", "list", subURL, "--wait", "1s").has(t, ids...)
	}
}

// TestExplainRabbit: explain reads the capabilities of a live RabbitMQ
// queue and of the PostgreSQL store's backlog.
func TestExplainRabbit(t *testing.T) {
	_, args := pgStore(t)
	_, topicURL, _, subURL := rabbitTopology(t)
	w := newWary(t)
	r := w.want(cli.ExitOK, append([]string{"explain", "--broker", topicURL, "--subscription", subURL, "--consumer", "billing"}, args...)...)
	r.has(t, "order per queue", "dead-letters after 5 deliveries (native)", "now: outbox backlog 0, 0 quarantined", `now: 0 parked message(s) of consumer "billing"`)
}

// TestProbeRabbit: the RabbitMQ driver keeps what it declares, measured
// on scratch queues that probe creates and deletes.
func TestProbeRabbit(t *testing.T) {
	rabbitTopology(t) // skips when RabbitMQ is unreachable; sets WARY_RABBIT_URL
	w := newWary(t)
	w.env[cli.EnvRabbit] = os.Getenv(rabbit.ServerURLEnv)
	r := w.want(cli.ExitOK, "probe", "rabbit://scratch", "--only", "order-within-scope,delivery-limit-dead-letters,dead-letter-with-reason")
	r.has(t, "order per queue", "limit 3 (native)", "dead-letter yes", "every observation matches the declaration")
}
