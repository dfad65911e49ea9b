package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/gcppubsub"
	"github.com/wary-go/wary/drivers/kafka"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/drivers/nats"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/redact"
)

// HarnessFunc builds the conformance harness with which probe measures
// the broker a URL names: its Setup creates a scratch topic and
// subscription for each scenario, and deletes them when the scenario
// ends. close releases what the harness holds.
type HarnessFunc func(ctx context.Context, u *url.URL, getenv func(string) string) (h conformance.Harness, close func(), err error)

// harnesses are the built-in probe harnesses, by URL scheme.
var harnesses = map[string]HarnessFunc{
	memory.Scheme:     memHarness,
	rabbit.Scheme:     rabbitHarness,
	rabbit.SchemeAMQP: rabbitHarness, rabbit.SchemeAMQPS: rabbitHarness,
	"kafka":           kafkaHarness,
	sqsfifo.Scheme:    sqsHarness,
	servicebus.Scheme: serviceBusHarness,
	nats.Scheme:       natsHarness,
	gcppubsub.Scheme:  pubsubHarness,
}

func scratchName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// memHarness probes the memory driver on a broker of its own, on a fake
// clock (waits cost no time), with the profile and parameters of the URL;
// the lock timeout, delivery limit and dedup window the scenarios ask
// for are applied where the URL does not set them.
func memHarness(_ context.Context, u *url.URL, _ func(string) string) (conformance.Harness, func(), error) {
	clock := memory.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := memory.New(&memory.Options{Clock: clock})
	mux := new(broker.URLMux)
	o := &memory.URLOpener{Broker: b}
	mux.RegisterTopic(memory.Scheme, o)
	mux.RegisterSubscription(memory.Scheme, o)
	user := u.Query()
	horizon := memory.DefaultMessageRetention
	if r := user.Get("retention"); r != "" {
		d, err := time.ParseDuration(r)
		if err != nil {
			return conformance.Harness{}, nil, fmt.Errorf("probe: retention: %w", err)
		}
		horizon = d
	}
	profile, err := memory.ParseProfile(user.Get("profile"))
	if err != nil {
		return conformance.Harness{}, nil, err
	}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		RedeliveryHorizon: horizon,
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			q := u.Query()
			def := func(k, v string) {
				if !q.Has(k) {
					q.Set(k, v)
				}
			}
			if profile != memory.Partitioned {
				def("lock", cfg.LockTimeout.String())
			}
			def("limit", strconv.Itoa(cfg.DeliveryLimit))
			if profile == memory.SQSFIFO || profile == memory.ServiceBus {
				def("dedup", cfg.DedupWindow.String())
			}
			name := scratchName("probe")
			top, err := mux.OpenTopic(ctx, (&url.URL{Scheme: memory.Scheme, Host: name, RawQuery: q.Encode()}).String())
			if err != nil {
				return nil, err
			}
			subURL := (&url.URL{Scheme: memory.Scheme, Host: name, Path: "/sub", RawQuery: q.Encode()}).String()
			// Create the subscription now: what is published before the
			// first consumer opens must reach it.
			first, err := mux.OpenSubscription(ctx, subURL)
			if err != nil {
				top.Close()
				return nil, err
			}
			first.Close()
			return &conformance.Fixture{
				Topic:     top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) { return mux.OpenSubscription(ctx, subURL) },
				DeadLetters: func(context.Context) (*broker.Subscription, error) {
					return b.OpenDeadLetters(name, "sub", nil)
				},
			}, nil
		},
		Wait:    func(_ context.Context, d time.Duration) { clock.Advance(d) },
		Quiet:   100 * time.Millisecond,
		MaxWait: 24 * time.Hour,
	}
	return h, func() { b.Close() }, nil
}

// rabbitHarness probes a RabbitMQ server: each scenario gets a scratch
// exchange and quorum queue (with a dead-letter queue, and the URL's
// partitions), deleted when it ends. The server is the amqp:// URL, or
// $WARY_RABBIT_URL for rabbit:// URLs.
func rabbitHarness(ctx context.Context, u *url.URL, getenv func(string) string) (conformance.Harness, func(), error) {
	q := u.Query()
	server := getenv(EnvRabbit)
	if u.Scheme != rabbit.Scheme {
		s := *u
		s.RawQuery = ""
		server = s.String()
	}
	if server == "" {
		return conformance.Harness{}, nil, fmt.Errorf("probe %s: name the server in $%s, or give an amqp:// URL", redact.URL(u), EnvRabbit)
	}
	partitions := 0
	if p := q.Get("partitions"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return conformance.Harness{}, nil, fmt.Errorf("probe: partitions: want a count")
		}
		partitions = n
	}
	conn, err := rabbit.Dial(ctx, server, nil)
	if err != nil {
		return conformance.Harness{}, nil, fmt.Errorf("RabbitMQ %s: %w", redact.String(server), err)
	}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		RedeliveryHorizon: capability.HorizonUnbounded, // quorum queues keep a message until it is settled
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			name := scratchName("wary-probe")
			topo := rabbit.Topology{Exchange: name, Queue: name, Partitions: partitions, DeliveryLimit: cfg.DeliveryLimit, DeadLetter: true}
			if err := rabbit.Declare(ctx, conn, topo); err != nil {
				return nil, err
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = topo.Delete(ctx, conn)
			})
			top, err := rabbit.OpenTopic(ctx, conn, topo, nil)
			if err != nil {
				return nil, err
			}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return rabbit.OpenSubscription(ctx, conn, topo, &rabbit.SubscriptionOptions{NackDelay: true})
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return rabbit.OpenDeadLetters(ctx, conn, topo, nil)
				},
			}, nil
		},
	}
	return h, func() { conn.Close() }, nil
}

// harnessFor finds the harness for a probe URL: the run's own (IO.Harnesses)
// first, then the built-in ones.
func (a *app) harnessFor(ctx context.Context, raw string) (conformance.Harness, func(), error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return conformance.Harness{}, nil, fmt.Errorf("%s is not a broker URL", redact.String(raw))
	}
	f, ok := a.io.Harnesses[u.Scheme]
	if !ok {
		f, ok = harnesses[u.Scheme]
	}
	if !ok {
		var known []string
		for s := range harnesses {
			known = append(known, s+"://")
		}
		return conformance.Harness{}, nil, fmt.Errorf("probe cannot create scratch queues for %s:// yet (it can for %s)", u.Scheme, strings.Join(sortedStrings(known), ", "))
	}
	return f(ctx, u, a.io.Getenv)
}

// kafkaHarness probes a Kafka cluster (brokers= or $WARY_KAFKA_BROKERS):
// each scenario gets a scratch topic of four partitions that keeps
// records forever (retention.ms=-1, so the horizon is unbounded), a
// dead-letter topic and a consumer group, deleted when it ends. ordered=
// chooses the consumer mode.
func kafkaHarness(ctx context.Context, u *url.URL, getenv func(string) string) (conformance.Harness, func(), error) {
	q := u.Query()
	seeds := q.Get("brokers")
	if seeds == "" {
		seeds = getenv(EnvKafka)
	}
	if seeds == "" {
		return conformance.Harness{}, nil, fmt.Errorf("probe %s: name the brokers with brokers= or $%s", redact.URL(u), EnvKafka)
	}
	ordered := q.Get("ordered") == "true"
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(seeds, ",")...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return conformance.Harness{}, nil, fmt.Errorf("kafka client for %s: %w", seeds, err)
	}
	adm := kadm.NewClient(cl)
	forever := "-1"
	create := func(t conformance.T, name string, partitions int32) error {
		resp, err := adm.CreateTopic(ctx, partitions, -1, map[string]*string{"retention.ms": &forever}, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopics(ctx, name)
		})
		return nil
	}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		RedeliveryHorizon: capability.HorizonUnbounded,
		Setup: func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			name := scratchName("wary-probe")
			if err := create(t, name, 4); err != nil {
				return nil, err
			}
			if err := create(t, name+"-dlq", 1); err != nil {
				return nil, err
			}
			so := &kafka.SubscriptionOptions{Ordered: ordered, DeadLetterTopic: name + "-dlq", DeliveryLimit: cfg.DeliveryLimit}
			// The clients are the probe's, closed when the scenario ends
			// (after the topic and subscriptions on them).
			newClient := func(driverOpts ...kgo.Opt) (*kgo.Client, error) {
				cl, err := kgo.NewClient(append(driverOpts, opts...)...)
				if err != nil {
					return nil, fmt.Errorf("kafka client for %s: %w", seeds, err)
				}
				t.Cleanup(cl.Close)
				return cl, nil
			}
			pcl, err := newClient(append(kafka.TopicOpts(), kgo.ProducerLinger(0))...)
			if err != nil {
				return nil, err
			}
			top, err := kafka.OpenTopic(ctx, pcl, name, nil)
			if err != nil {
				return nil, err
			}
			type openFunc func(context.Context, *kgo.Client, string, string, *kafka.SubscriptionOptions) (*broker.Subscription, error)
			subscribe := func(ctx context.Context, open openFunc, topic, group string, so *kafka.SubscriptionOptions) (*broker.Subscription, error) {
				scl, err := newClient(kafka.SubscriptionOpts(group)...)
				if err != nil {
					return nil, err
				}
				return open(ctx, scl, topic, group, so)
			}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return subscribe(ctx, kafka.OpenSubscription, name, name+"-group", so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return subscribe(ctx, kafka.OpenDeadLetters, name+"-dlq", name+"-dlq-group", nil)
				},
			}, nil
		},
	}
	return h, cl.Close, nil
}
