package kafka_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/kafka"
)

// testEnv is a Kafka cluster for tests: an in-process kfake cluster, or the
// cluster WARY_KAFKA_BROKERS names.
type testEnv struct {
	seeds   []string
	fake    *kfake.Cluster // nil on a real cluster
	admin   *kadm.Client
	adminCl *kgo.Client
}

var nameSeq atomic.Int64

// uniqueName returns a topic or group name not used before in this process
// (nor, with the time in it, by an earlier run on a real cluster).
func uniqueName(prefix string) string {
	return fmt.Sprintf("wary-%s-%d-%d", prefix, time.Now().UnixNano()%1e9, nameSeq.Add(1))
}

func newTestEnv(t conformance.T, fakeOpts ...kfake.Opt) *testEnv {
	t.Helper()
	e := &testEnv{}
	if v := os.Getenv("WARY_KAFKA_BROKERS"); v != "" && len(fakeOpts) == 0 {
		e.seeds = strings.Split(v, ",")
	} else {
		c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second)}, fakeOpts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		e.fake = c
		e.seeds = c.ListenAddrs()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e.adminCl = cl
	e.admin = kadm.NewClient(cl)
	return e
}

// clientOpts are the options for consumer clients in tests: quick
// heartbeats so that rebalances settle fast.
func (e *testEnv) clientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(e.seeds...),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
}

// producerOpts are the options for topics' clients in tests: no linger.
func (e *testEnv) producerOpts() []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(e.seeds...), kgo.ProducerLinger(0)}
}

// producer returns a plain client (for writing raw records), closed when t
// ends.
func (e *testEnv) producer(t conformance.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(e.producerOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns an admin client closed when t ends (a client opened
// before conformance.Run would open connections during it, which the
// suite's leak check would report).
func (e *testEnv) newAdmin(t conformance.T) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func (e *testEnv) createTopic(t conformance.T, partitions int32, prefix string) string {
	return e.createTopicWith(t, e.admin, partitions, prefix)
}

func (e *testEnv) createTopicWith(t conformance.T, adm *kadm.Client, partitions int32, prefix string) string {
	t.Helper()
	name := uniqueName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	return name
}
func requireFake(t conformance.T, e *testEnv) {
	if e.fake == nil {
		t.Skip("fault injection needs kfake (WARY_KAFKA_BROKERS is set)")
	}
}

// tb is what the client helpers need of a test or benchmark.
type tb interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// topicClient returns a client for topics (TopicOpts, then producerOpts,
// then extra), closed when t ends.
func (e *testEnv) topicClient(t tb, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append(kafka.TopicOpts(), e.producerOpts()...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// subClient returns a client for a subscription of group
// (SubscriptionOpts, then clientOpts, then extra), closed when t ends.
func (e *testEnv) subClient(t tb, group string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append(kafka.SubscriptionOpts(group), e.clientOpts()...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// openSub opens a subscription of group on topic, on a client of its own
// (subClient) closed when t ends.
func (e *testEnv) openSub(ctx context.Context, t tb, topic, group string, so *kafka.SubscriptionOptions, extra ...kgo.Opt) (*broker.Subscription, error) {
	t.Helper()
	return kafka.OpenSubscription(ctx, e.subClient(t, group, extra...), topic, group, so)
}

// receiveOne receives from s the one delivery a test expects.
func receiveOne(ctx context.Context, t testing.TB, what string, s *broker.Subscription) *broker.Delivery {
	t.Helper()
	ds, err := s.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("%s: receive %v %v, want one delivery", what, ds, err)
	}
	return ds[0]
}

// openDeadLetters reads the dead-letter topic dlt as group
// (kafka.OpenDeadLetters), on a client of its own (subClient) closed when t
// ends.
func (e *testEnv) openDeadLetters(ctx context.Context, t tb, dlt, group string, so *kafka.SubscriptionOptions, extra ...kgo.Opt) (*broker.Subscription, error) {
	t.Helper()
	return kafka.OpenDeadLetters(ctx, e.subClient(t, group, extra...), dlt, group, so)
}

// txSession returns a transact session client for group (TransactOpts,
// then clientOpts, then extra), closed when t ends.
func (e *testEnv) txSession(t tb, group string, extra ...kgo.Opt) *kgo.GroupTransactSession {
	t.Helper()
	s, err := kgo.NewGroupTransactSession(append(append(kafka.TransactOpts(group), e.clientOpts()...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
