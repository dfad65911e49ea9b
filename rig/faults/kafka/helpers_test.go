package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// testEnv is an in-process kfake cluster, whose faults the tests inject.
type testEnv struct {
	seeds []string
	fake  *kfake.Cluster
	admin *kadm.Client
}

var nameSeq atomic.Int64

// uniqueName returns a topic or group name not used before in this process.
func uniqueName(prefix string) string {
	return fmt.Sprintf("wary-%s-%d", prefix, nameSeq.Add(1))
}

func newTestEnv(t *testing.T, fakeOpts ...kfake.Opt) *testEnv {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second)}, fakeOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &testEnv{seeds: c.ListenAddrs(), fake: c, admin: kadm.NewClient(cl)}
}

// clientOpts are the consumers' options: quick heartbeats, so that
// rebalances settle fast.
func (e *testEnv) clientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(e.seeds...), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second), kgo.FetchMaxWait(500 * time.Millisecond)}
}

// producerOpts are the topics' options: no linger.
func (e *testEnv) producerOpts() []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(e.seeds...), kgo.ProducerLinger(0)}
}

// topicClient returns a topic's client (TopicOpts, producerOpts), closed
// when t ends.
func (e *testEnv) topicClient(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(kafka.TopicOpts(), e.producerOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// openSub opens a subscription of group on topic, on a client of its own
// (SubscriptionOpts, clientOpts) closed when t ends.
func (e *testEnv) openSub(t *testing.T, topic, group string) (*broker.Subscription, error) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafka.SubscriptionOpts(group), e.clientOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kafka.OpenSubscription(t.Context(), cl, topic, group, nil)
}

// createTopic creates a topic with partitions, deleted when t ends.
func (e *testEnv) createTopic(t *testing.T, partitions int32, prefix string) string {
	t.Helper()
	name := uniqueName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.admin.CreateTopic(ctx, partitions, -1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}
