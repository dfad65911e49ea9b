//go:build kafka

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKafkaFake runs the example on kfake, franz-go's in-process Kafka.
func TestKafkaFake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run(t, Config{Broker: "kafka://orders?brokers=" + strings.Join(c.ListenAddrs(), ",")})
}

func TestTelemetryKafkaFake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runTraced(t, Config{Broker: "kafka://orders?brokers=" + strings.Join(c.ListenAddrs(), ",")}, "kafka", "orders")
}
