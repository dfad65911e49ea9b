package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
)

// kfakeCluster starts an in-process Kafka with the topics, and returns
// its seed brokers as WARY_KAFKA_BROKERS takes them.
func kfakeCluster(t *testing.T, topics ...string) string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// TestKafkaExplainAndDLQ: explain reads a Kafka consumer's capabilities
// (the library's delivery limit and dead-letter topic), and dead letters
// on the dead-letter topic are listed, replayed and discarded through the
// consumer's subscription URL.
func TestKafkaExplainAndDLQ(t *testing.T) {
	seeds := kfakeCluster(t, "orders", "orders-dlq")
	w := newWary(t)
	w.env[cli.EnvKafka] = seeds
	subURL := "kafka://billing?topic=orders&dead_letter_topic=orders-dlq&delivery_limit=3"
	r := w.want(cli.ExitOK, "explain", "--broker", "kafka://orders", "--subscription", subURL,
		"--outbox", "--inbox", "--consumer", "billing", "--retention", "720h", "--ordered")
	r.has(t, "order per partition", "dead-letters after 3 deliveries (emulated)", "no misconfiguration found",
		"topic read from topic orders's partitions and configs (kadm Metadata, DescribeTopicConfigs)",
		"subscription read from topic orders's partitions and configs (kadm Metadata, DescribeTopicConfigs); dead-letter topic orders-dlq found")

	top := mustOpenTopic(t, "kafka://orders?brokers="+seeds)
	sub := mustOpenSub(t, subURL+"&brokers="+seeds)
	dlqWalkthrough(t, w, top, "kafka://orders", sub, subURL, "10s")

	// Acks are cumulative: removing the second dead letter would remove
	// the first too, so only the first ones in order can be chosen.
	publish(t, top, event("k-1", "order-9", 1), event("k-2", "order-9", 2))
	for _, d := range receive(t, sub, 2) {
		if err := d.DeadLetter(t.Context(), "poison"); err != nil {
			t.Fatal(err)
		}
	}
	r = w.want(cli.ExitError, "dlq", "discard", subURL, "--id", "k-2", "--yes", "--wait", "10s")
	if !strings.Contains(r.errout, "choose the first ones in order") {
		t.Errorf("stderr %q does not explain the refusal", r.errout)
	}
	w.want(cli.ExitOK, "dlq", "discard", subURL, "--id", "k-1", "--id", "k-2", "--yes", "--wait", "10s").has(t, "discard: 2 dead letter(s)")
}

// TestProbeKafka: the Kafka driver keeps what it declares, measured on
// scratch topics that probe creates and deletes.
func TestProbeKafka(t *testing.T) {
	seeds := kfakeCluster(t)
	w := newWary(t)
	w.env[cli.EnvKafka] = seeds
	r := w.want(cli.ExitOK, "probe", "kafka://scratch")
	r.has(t, "order per partition", "every observation matches the declaration")
}
