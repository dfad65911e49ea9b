package soak_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/gcppubsub/psemu"
	"github.com/wary-go/wary/drivers/memory"
	wnats "github.com/wary-go/wary/drivers/nats"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/internal/servicetest"
	"github.com/wary-go/wary/rig/soak"
)

// TestMain lets the test binary be the soak's worker processes too. The
// soaks run in parallel: each has its own broker (or queue) and schema, and
// much of their time is spent waiting for faults to play out.
func TestMain(m *testing.M) {
	soak.ChildMain()
	os.Exit(m.Run())
}

// defaultMessages is the count per driver in `make test`: issue 17's
// 10,000. -soak.messages=100000 (or WARY_SOAK_MESSAGES) runs the published
// figures.
const defaultMessages = 10000

var (
	messages = flag.Int("soak.messages", envInt("WARY_SOAK_MESSAGES", defaultMessages), "messages per driver (env WARY_SOAK_MESSAGES)")
	seed     = flag.Uint64("soak.seed", uint64(envInt("WARY_SOAK_SEED", 0)), "fault schedule seed (env WARY_SOAK_SEED; 0: from the clock)")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func postgresURL(t *testing.T) string {
	return servicetest.URL(t, "WARY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", func(ctx context.Context, u string) error {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.Ping(ctx)
	})
}

// soakDir is where the workers' logs go: WARY_SOAK_DIR/TestName if set
// (kept for reading), else a temporary directory.
func soakDir(t *testing.T) string {
	base := os.Getenv("WARY_SOAK_DIR")
	if base == "" {
		return t.TempDir()
	}
	dir := filepath.Join(base, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// soakRun runs target on PostgreSQL and fails t unless the report is OK.
func soakRun(t *testing.T, target soak.Target) {
	soakRunOn(t, soak.Config{Postgres: postgresURL(t)}, target)
}

// mariaDB is the store configuration of a soak on the MySQL or MariaDB
// server of WARY_MYSQL_URL (skipped when it cannot be reached, failed
// when WARY_MYSQL_URL is set or WARY_REQUIRE_SERVICES=1).
func mariaDB(t *testing.T) soak.Config {
	return soak.Config{MySQL: mysqltest.Server(t)}
}

// soakRunOn runs target on the store that store names (its Postgres or
// MySQL) and fails t unless the report is OK.
func soakRunOn(t *testing.T, store soak.Config, target soak.Target) {
	cfg := store
	cfg.Messages, cfg.Seed, cfg.Dir, cfg.Logf = *messages, *seed, soakDir(t), t.Logf
	cfg.Timeout = 5*time.Minute + time.Duration(*messages)*25*time.Millisecond
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	rep, err := soak.Run(t.Context(), cfg, target)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	t.Log("\n" + rep.String())
	if !rep.OK() {
		t.Fatalf("soak failed; rerun with -soak.seed=%d", cfg.Seed)
	}
}

// memoryTarget is the memory driver, its broker in this process.
func memoryTarget(t *testing.T) soak.Target {
	b := memory.New(nil)
	t.Cleanup(func() { b.Close() })
	o := &memory.URLOpener{Broker: b}
	mux := new(broker.URLMux)
	mux.RegisterTopic(memory.Scheme, o)
	mux.RegisterSubscription(memory.Scheme, o)
	// The queue profile's delivery limit of 10: the queue keeps no order,
	// so the inbox holds version gaps in the store (idem.GapsAuto) and
	// they cost no delivery; a message dead-lettered would be lost to
	// the consumer and fail the run.
	const subURL = "mem://soak/consumers?lock=3s&limit=10"
	// The subscription exists before the relay publishes (a memory topic
	// drops what no subscription takes).
	sub, err := mux.OpenSubscription(t.Context(), subURL)
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	return soak.Target{
		Name: "memory", TopicURL: "mem://soak?lock=3s&limit=10", SubscriptionURL: subURL,
		InProcess: mux, LockTimeout: 3 * time.Second,
		DeliveryLimit: "10 deliveries (the memory queue's default), then dead-lettered",
		DeadLettered: func(ctx context.Context) (int, error) {
			dead, err := b.OpenDeadLetters("soak", "consumers", nil)
			if err != nil {
				return 0, err
			}
			defer dead.Close()
			// A memory receive with a done context returns what is
			// there without waiting.
			done, cancel := context.WithCancel(ctx)
			cancel()
			n := 0
			for {
				ds, err := dead.Receive(done, 100)
				n += len(ds)
				if len(ds) == 0 || err != nil {
					return n, nil
				}
			}
		},
		NotApplicable: map[soak.Kind]string{
			soak.BrokerReset:   "the broker lives in the test process: there is no connection to cut",
			soak.BrokerRestart: "the broker lives in the test process",
		},
	}
}

// The memory target counts what its subscription dead-lettered (the
// soak fails on any).
func TestMemoryTargetCountsDeadLetters(t *testing.T) {
	target := memoryTarget(t)
	ctx := t.Context()
	top, err := target.InProcess.OpenTopic(ctx, target.TopicURL)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := target.InProcess.OpenSubscription(ctx, target.SubscriptionURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if n, err := target.DeadLettered(ctx); err != nil || n != 0 {
		t.Fatalf("before: %d dead letters (%v), want 0", n, err)
	}
	if err := top.Publish(ctx, &broker.Message{ID: "m1", Body: []byte("x")}, &broker.Message{ID: "m2", Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 2)
	if err != nil || len(ds) == 0 {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	if err := ds[0].DeadLetter(ctx, "soak self-test"); err != nil {
		t.Fatal(err)
	}
	if n, err := target.DeadLettered(ctx); err != nil || n != 1 {
		t.Fatalf("after one dead letter: %d (%v), want 1", n, err)
	}
}

func TestSoakMemory(t *testing.T) {
	t.Parallel()
	soakRun(t, memoryTarget(t))
}

// TestSoakMemoryMariaDB is TestSoakMemory with the store on MariaDB: the
// memory target's lock timeout adds lock-expiry (a handler holding its
// claim in the inbox's *sql.Tx past the lock) to the faults that
// TestSoakRabbitMariaDB injects.
func TestSoakMemoryMariaDB(t *testing.T) {
	t.Parallel()
	store := mariaDB(t)
	soakRunOn(t, store, memoryTarget(t))
}

// selfTestConfig is a short memory run for the tests of the soak itself,
// on PostgreSQL.
func selfTestConfig(t *testing.T) soak.Config {
	return selfTestConfigOn(t, soak.Config{Postgres: postgresURL(t)})
}

// selfTestConfigOn is selfTestConfig on the store that store names.
func selfTestConfigOn(t *testing.T, store soak.Config) soak.Config {
	cfg := store
	cfg.Messages, cfg.Seed, cfg.Dir, cfg.Timeout, cfg.Logf = 500, 7, t.TempDir(), 5*time.Minute, t.Logf
	return cfg
}

// A consumer without the inbox and the version check applies redelivered
// messages again: the run must fail on duplicated effects, on either
// store.
func TestSoakFailsOnDuplicateEffects(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		failsOnDuplicateEffects(t, selfTestConfig(t))
	})
	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		failsOnDuplicateEffects(t, selfTestConfigOn(t, mariaDB(t)))
	})
}

func failsOnDuplicateEffects(t *testing.T, cfg soak.Config) {
	rep, err := soak.Run(t.Context(), soak.Unsafe(cfg), memoryTarget(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	// Without the inbox and version checks, a redelivery applies an
	// effect twice or a late copy overwrites newer state: either fails
	// the run (which one a given schedule produces is up to timing).
	if rep.OK() || len(rep.History.DuplicateEffects) == 0 && len(rep.OrderViolations) == 0 {
		t.Fatalf("an unsafe consumer passed the soak (duplicated effects %d, order violations %d)", len(rep.History.DuplicateEffects), len(rep.OrderViolations))
	}
}

// A scheduled fault that is not seen to fire fails the run.
func TestSoakFailsOnUnfiredFault(t *testing.T) {
	t.Parallel()
	target := memoryTarget(t)
	delete(target.NotApplicable, soak.BrokerRestart)
	target.BrokerRestart = func(context.Context) (int, error) { return 0, nil } // does nothing
	target.LockTimeout, target.NotApplicable[soak.LockExpiry] = 0, "not needed here"
	rep, err := soak.Run(t.Context(), selfTestConfig(t), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if rep.OK() || len(rep.NotFired) != 1 || !strings.Contains(rep.NotFired[0], string(soak.BrokerRestart)) {
		t.Fatalf("a fault that did nothing: OK %v, not fired %q", rep.OK(), rep.NotFired)
	}
}

func TestSoakRabbit(t *testing.T) {
	t.Parallel()
	soakRun(t, rabbitTarget(t))
}

// TestSoakRabbitMariaDB is TestSoakRabbit with the store on MariaDB
// (idem/mysql): the inbox, the outbox and the effects in one database of
// the server of WARY_MYSQL_URL, whose connections the database-reset
// fault cuts.
func TestSoakRabbitMariaDB(t *testing.T) {
	t.Parallel()
	store := mariaDB(t)
	soakRunOn(t, store, rabbitTarget(t))
}

// rabbitTarget declares a quorum queue and its dead-letter queue on the
// server of WARY_RABBIT_URL, deleted when t ends.
func rabbitTarget(t *testing.T) soak.Target {
	raw := servicetest.URL(t, rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, u string) error {
		c, err := rabbit.Dial(ctx, u, nil)
		if err != nil {
			return err
		}
		return c.Close()
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: not a URL", rabbit.ServerURLEnv)
	}
	conn, err := rabbit.Dial(t.Context(), raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	name := fmt.Sprintf("wary-soak-%d", time.Now().UnixNano())
	// RabbitMQ 4's default limit for a quorum queue (x-delivery-limit 20),
	// dead-lettered to a queue the run counts at the end.
	const limit = 21
	topo := rabbit.Topology{Exchange: name, Queue: name + ".consumers", DeliveryLimit: limit, DeadLetter: true}
	if err := rabbit.Declare(t.Context(), conn, topo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Delete(context.WithoutCancel(t.Context()), conn) })
	proxied := *u
	proxied.Host = "{broker}"
	q := url.Values{"exchange": {topo.Exchange}}
	proxied.RawQuery = q.Encode()
	topicURL := proxied.String()
	proxied.RawQuery = url.Values{"queue": {topo.Queue}, "delivery_limit": {strconv.Itoa(limit)}, "dead_letter_exchange": {topo.DeadLetterExchange()}}.Encode()
	return soak.Target{
		Name: "rabbit", TopicURL: unescapeBroker(topicURL), SubscriptionURL: unescapeBroker(proxied.String()), BrokerAddr: u.Host,
		SingleActive:  true,
		DeliveryLimit: fmt.Sprintf("%d deliveries (quorum queue x-delivery-limit %d, RabbitMQ 4's default), then dead-lettered to %s", limit, limit-1, topo.DeadLetterQueue()),
		DeadLettered:  func(ctx context.Context) (int, error) { return rabbitQueueLength(ctx, raw, topo.DeadLetterQueue()) },
		NotApplicable: map[soak.Kind]string{
			soak.BrokerRestart: "the RabbitMQ server is shared with other tests on this machine, so rabbitmqctl stop_app is not safe; broker-reset cuts every connection instead",
			soak.LockExpiry:    "RabbitMQ has no per-delivery lock timeout (consumer_timeout is a server setting in minutes)",
		},
	}
}

// unescapeBroker undoes url's escaping of the "{broker}" placeholder.
func unescapeBroker(s string) string { return strings.ReplaceAll(s, "%7Bbroker%7D", "{broker}") }

func TestSoakKafka(t *testing.T) {
	// Issue 17 (see docs/reliability.md): after BrokerRestart's leader moves, kfake
	// answers OffsetForLeaderEpoch for the epoch a consumer at the end of a
	// partition consumed at as "unknown" (pkg/kfake
	// 23_offset_for_leader_epoch.go, "Requested epoch is not yet known"),
	// and kgo reports ErrDataLoss and rewinds the partition to its start:
	// the driver reads it again, the inbox absorbs the copies. The
	// workers' rebalance timeout works around kfake's dropped JoinGroup
	// (see childMux).
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic, partitions = "soak", 6
	if err := c.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
	// The driver's delivery limit (counted by the library: Kafka keeps
	// no count) dead-letters to a topic the run counts at the end.
	const dlq, limit = "soak.dlq", 10
	if err := c.CreateTopic(dlq, 1, nil); err != nil {
		t.Fatal(err)
	}
	seeds := ""
	for i, a := range c.ListenAddrs() {
		if i > 0 {
			seeds += ","
		}
		seeds += a
	}
	soakRun(t, soak.Target{
		Name:            "kafka (kfake)",
		TopicURL:        "kafka://" + topic + "?brokers=" + seeds,
		SubscriptionURL: "kafka://soak-consumers?topic=" + topic + "&brokers=" + seeds + "&delivery_limit=" + strconv.Itoa(limit) + "&dead_letter_topic=" + dlq,
		DeliveryLimit:   fmt.Sprintf("%d deliveries (the kafka driver's DeliveryLimit, counted by the library: a rebalance restarts the count), then written to %s", limit, dlq),
		DeadLettered:    func(ctx context.Context) (int, error) { return kafkaTopicLength(ctx, c.ListenAddrs(), dlq) },
		BrokerReset: func(ctx context.Context) (int, error) {
			// The broker closes the connections of the next fetch and
			// the next heartbeat.
			var cut atomic.Int32
			for _, k := range []kmsg.Key{kmsg.Fetch, kmsg.Heartbeat} {
				c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
					cut.Add(1)
					return nil, errors.New("soak: connection cut"), true
				})
			}
			ctx, cancel := context.WithTimeout(ctx, soak.StepTimeout)
			defer cancel()
			for cut.Load() < 2 {
				select {
				case <-ctx.Done():
					return int(cut.Load()), fmt.Errorf("only %d of 2 connections cut: %w", cut.Load(), ctx.Err())
				case <-time.After(20 * time.Millisecond):
				}
			}
			return int(cut.Load()), nil
		},
		BrokerRestart: func(context.Context) (int, error) {
			// A leader election on every partition and new group
			// coordinators: kfake's stand-in for a broker bounce.
			moved := 0
			for try := 0; moved == 0 && try < 10; try++ {
				before := make([]int32, partitions)
				for p := range partitions {
					before[p] = c.LeaderFor(topic, int32(p))
				}
				c.ShufflePartitionLeaders()
				for p := range partitions {
					if c.LeaderFor(topic, int32(p)) != before[p] {
						moved++
					}
				}
			}
			c.RehashCoordinators()
			return moved, nil
		},
		NotApplicable: map[soak.Kind]string{
			soak.LockExpiry: "Kafka has no per-message lock: a partition is held by its group member until it leaves or its session times out",
		},
	})
}

func TestSoakSQSFIFO(t *testing.T) {
	t.Parallel()
	srv := sqsemu.Start(t, sqsemu.Options{})
	if srv.Real {
		t.Skip("the soak needs the emulator's port behind a proxy, not " + sqsemu.EnvEndpoint)
	}
	client := srv.NewClient(t, nil)
	name := fmt.Sprintf("wary-soak-%d.fifo", time.Now().UnixNano())
	const lock = 5 * time.Second
	// A redrive policy: after 10 receives a message moves to a
	// dead-letter queue the run counts at the end.
	const limit = 10
	dlq, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("dlq-" + name), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes[string(types.QueueAttributeNameQueueArn)], limit)
	if _, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"FifoQueue": "true", "VisibilityTimeout": strconv.Itoa(int(lock / time.Second)), "RedrivePolicy": redrive,
	}}); err != nil {
		t.Fatal(err)
	}
	queueURL := "sqsfifo://" + name + "?" + "region=" + sqsemu.Region + "&endpoint=http://{broker}"
	soakRun(t, soak.Target{
		Name: "sqsfifo (fauxqs)", TopicURL: queueURL, SubscriptionURL: queueURL,
		BrokerAddr: fmt.Sprintf("127.0.0.1:%d", srv.Port), LockTimeout: lock,
		DeliveryLimit: fmt.Sprintf("%d receives (redrive policy maxReceiveCount), then moved to dlq-%s", limit, name),
		DeadLettered: func(ctx context.Context) (int, error) {
			a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{
				types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err != nil {
				return 0, err
			}
			n := 0
			for _, v := range a.Attributes {
				k, err := strconv.Atoi(v)
				if err != nil {
					return 0, err
				}
				n += k
			}
			return n, nil
		},
		// The workers find credentials in the SDK's default chain;
		// fauxqs accepts any.
		Env: map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"},
		NotApplicable: map[soak.Kind]string{
			soak.BrokerRestart: "fauxqs keeps its queues in memory: a restart loses them, which SQS never does",
		},
	})
}

// TestSoakGCPPubSub soaks a Pub/Sub subscription without ordering on
// pstest (psemu, in this process, behind the soak's proxy): competing
// consumers, version checks put gaps back, a dead-letter policy of 10
// delivery attempts whose topic's subscription the run counts at the end.
// The workers reach the fake through PUBSUB_EMULATOR_HOST.
func TestSoakGCPPubSub(t *testing.T) {
	t.Parallel()
	srv, err := psemu.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx := t.Context()
	client, err := srv.NewClient(ctx, "wary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	name := fmt.Sprintf("wary-soak-%d", time.Now().UnixNano())
	full := func(kind, n string) string { return "projects/wary/" + kind + "/" + n }
	const lock = 5 * time.Second
	const limit = 10
	for _, tn := range []string{name, name + "-dead"} {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: full("topics", tn)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: full("subscriptions", name+"-dead"), Topic: full("topics", name+"-dead"), AckDeadlineSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: full("subscriptions", name), Topic: full("topics", name), AckDeadlineSeconds: int32(lock / time.Second),
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: full("topics", name+"-dead"), MaxDeliveryAttempts: limit},
	}); err != nil {
		t.Fatal(err)
	}
	soakRun(t, soak.Target{
		Name: "gcppubsub (pstest)", TopicURL: "gcppubsub://" + full("topics", name), SubscriptionURL: "gcppubsub://" + full("subscriptions", name) + "?wait_time=1s",
		BrokerAddr: srv.Addr, LockTimeout: lock,
		DeliveryLimit: fmt.Sprintf("%d delivery attempts (dead-letter policy), then moved to topic %s-dead", limit, name),
		DeadLettered: func(ctx context.Context) (int, error) {
			// Pull what the dead-letter subscription holds, and give it
			// back.
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			res, err := client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: full("subscriptions", name+"-dead"), MaxMessages: 1000})
			if err != nil {
				if ctx.Err() != nil {
					return 0, nil
				}
				return 0, err
			}
			ids := make([]string, len(res.ReceivedMessages))
			for i, m := range res.ReceivedMessages {
				ids[i] = m.AckId
			}
			if len(ids) > 0 {
				_ = client.SubscriptionAdminClient.ModifyAckDeadline(context.Background(), &pubsubpb.ModifyAckDeadlineRequest{Subscription: full("subscriptions", name+"-dead"), AckIds: ids})
			}
			return len(ids), nil
		},
		Env: map[string]string{"PUBSUB_EMULATOR_HOST": "{broker}"},
		NotApplicable: map[soak.Kind]string{
			soak.BrokerRestart: "pstest keeps its topics and subscriptions in memory: a restart loses them, which Pub/Sub never does",
		},
	})
}

// TestSoakServiceBus soaks a queue without sessions: competing consumers,
// no order, version checks put it back. A gap sends every later event of
// its aggregate around the queue again, behind everything queued.
func TestSoakServiceBus(t *testing.T) {
	t.Parallel()
	soakServiceBus(t, false)
}

// TestSoakServiceBusSessions soaks a session queue, Service Bus's ordering
// scope and the configuration the driver's docs recommend: one consumer
// holds an aggregate's session at a time.
func TestSoakServiceBusSessions(t *testing.T) {
	t.Parallel()
	soakServiceBus(t, true)
}

func soakServiceBus(t *testing.T, sessions bool) {
	const lock = 5 * time.Second
	// Without sessions the queue keeps no order: the inbox holds version
	// gaps in the store (idem.GapsAuto), so Service Bus's default
	// delivery limit of 10 is kept. A session queue keeps each
	// aggregate's order, and the inbox retries its rare gaps through the
	// broker: a high limit, so that none is dead-lettered for them.
	limit := int32(10)
	if sessions {
		limit = 1000
	}
	e := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "soak", RequiresSession: sessions, LockDuration: lock, MaxDeliveryCount: limit}}})
	if e.Real {
		t.Skip("the soak needs the emulator's port behind a proxy, not " + sbemu.EnvConnectionString)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", e.Port)
	// The driver reads the queue's settings through the emulator's
	// administration endpoint, which the soak's proxy does not stand in
	// front of.
	queueURL := "servicebus://soak"
	name := "servicebus (emulator)"
	notApplicable := map[soak.Kind]string{
		soak.BrokerRestart: "the emulator keeps its entities in memory: a restart loses them, which Service Bus never does",
	}
	if sessions {
		queueURL += "?sessions=true"
		name = "servicebus (emulator, sessions)"
		// A session's messages stay locked while its session is held,
		// and the driver renews the session lock: a slow handler keeps
		// its message. A killed consumer's session lock does expire.
		notApplicable[soak.LockExpiry] = "on a session queue a message is locked by its session, which the driver renews while a handler runs; a killed consumer's session lock expires (consumer-kill)"
	}
	soakRun(t, soak.Target{
		Name: name, TopicURL: queueURL, SubscriptionURL: queueURL,
		BrokerAddr: addr, LockTimeout: lock,
		DeliveryLimit: fmt.Sprintf("%d deliveries (the queue's MaxDeliveryCount), then dead-lettered; the dead-letter subqueue is not counted here (the run's lost count covers a message dead-lettered unapplied)", limit),
		Env: map[string]string{
			servicebus.ConnectionStringEnv: strings.Replace(e.ConnectionString, addr, "{broker}", 1),
			servicebus.EnvAdminEndpoint:    e.AdminEndpoint,
		},
		NotApplicable: notApplicable,
	})
}

// rabbitQueueLength is how many messages queue holds.
func rabbitQueueLength(ctx context.Context, rawURL, queue string) (int, error) {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	return q.Messages, ctx.Err()
}

// kafkaTopicLength is how many records topic holds (the sum of its
// partitions' end offsets: nothing is deleted during a run).
func kafkaTopicLength(ctx context.Context, seeds []string, topic string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) { n += int(o.Offset) })
	return n, ends.Error()
}

// TestSoakNATS soaks a JetStream stream and its durable pull consumer on
// the local server (WARY_NATS_URL), through the proxy: competing
// consumers, no order (max_ack_pending 1000), version checks put it back.
// The consumer's max_deliver 21 is a delivery limit of 20, then the
// driver's dead-letter stream, which the run counts at the end.
func TestSoakNATS(t *testing.T) {
	t.Parallel()
	raw := servicetest.URL(t, "WARY_NATS_URL", "nats://127.0.0.1:4222", func(ctx context.Context, u string) error {
		nc, err := natsgo.Connect(u)
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal("WARY_NATS_URL: not a URL")
	}
	nc, err := natsgo.Connect(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const lock = 5 * time.Second
	const maxDeliver = 21
	name := fmt.Sprintf("wary_soak_%d", time.Now().UnixNano())
	spec := wnats.Spec{Stream: name, Subject: "wary.soak." + name, Consumer: "consumers", AckWait: lock, MaxDeliver: maxDeliver, MaxAckPending: 1000}
	if err := wnats.Declare(t.Context(), js, spec); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx := context.WithoutCancel(t.Context())
		_ = js.DeleteStream(ctx, spec.Stream)
		_ = js.DeleteStream(ctx, wnats.DeadLetterStream(spec.Stream))
	}()
	subURL := "nats://{broker}/" + name + "?consumer=consumers&subject=" + spec.Subject
	soakRun(t, soak.Target{
		Name: "nats (JetStream)", TopicURL: subURL, SubscriptionURL: subURL, BrokerAddr: u.Host, LockTimeout: lock,
		DeliveryLimit: fmt.Sprintf("%d deliveries (consumer max_deliver %d), then dead-lettered by the driver to %s", maxDeliver-1, maxDeliver, wnats.DeadLetterStream(name)),
		DeadLettered: func(ctx context.Context) (int, error) {
			st, err := js.Stream(ctx, wnats.DeadLetterStream(name))
			if err != nil {
				return 0, err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return 0, err
			}
			return int(info.State.Msgs), nil
		},
		NotApplicable: map[soak.Kind]string{
			soak.BrokerRestart: "the NATS server is shared with other tests on this machine: restarting it is not safe; broker-reset cuts every connection instead",
		},
	})
}
