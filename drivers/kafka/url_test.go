package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/kafka"
)

func TestURLs(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 2, "url")
	ctx := context.Background()
	brokers := e.seeds[0]
	if _, err := broker.OpenTopic(ctx, "kafka://"+topic+"?brokers="+brokers+"&bogus=1"); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("unknown parameter: %v", err)
	}
	// A malformed value is ErrInvalid, naming the parameter without
	// echoing the value.
	for _, q := range []string{"ordered=hunter2", "delivery_limit=hunter2", "delivery_limit=-1", "commit_interval=hunter2", "skip_check=hunter2"} {
		_, err := broker.OpenSubscription(ctx, "kafka://g?topic="+topic+"&brokers="+brokers+"&"+q)
		if !errors.Is(err, broker.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", q, err)
		}
		if name, _, _ := strings.Cut(q, "="); !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("%s: the error must name the parameter and not echo its value: %v", q, err)
		}
	}
	if _, err := broker.OpenTopic(ctx, "kafka://"+topic+"?brokers="+brokers+"&skip_check=hunter2"); !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("skip_check=hunter2 on a topic: %v", err)
	}
	// One name, no path; no userinfo (credentials go in
	// URLOpener.ClientOpts); no value echoed.
	for _, raw := range []string{
		"kafka://" + topic[:3] + "/" + topic[3:] + "?brokers=" + brokers, // once opened the topic named by joining them
		"kafka://user:hunter2@" + topic + "?brokers=" + brokers,
		"kafka://user@" + topic + "?brokers=" + brokers,
		"kafka://" + topic + "?brokers=" + brokers + "&colour=hunter2",
	} {
		if _, err := broker.OpenTopic(ctx, raw); !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want ErrInvalid without the value", raw, err)
		}
		sraw := strings.Replace(raw, "?", "?topic="+topic+"&", 1)
		if _, err := broker.OpenSubscription(ctx, sraw); !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want ErrInvalid without the value", sraw, err)
		}
	}
	skipped, err := broker.OpenTopic(ctx, "kafka://"+uniqueName("absent")+"?brokers="+brokers+"&skip_check=true")
	if err != nil {
		t.Fatalf("skip_check=true opens a topic without looking it up: %v", err)
	}
	if n := skipped.Capabilities().MaxMessageSize; n <= 0 {
		t.Fatalf("skip_check=true: MaxMessageSize %d, want the producer's batch limit less the overhead", n)
	}
	skipped.Close()
	top, err := broker.OpenTopic(ctx, "kafka://"+topic+"?brokers="+brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, "kafka://"+uniqueName("g")+"?topic="+topic+"&brokers="+brokers+"&ordered=true&commit_interval=100ms")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !sub.Capabilities().HeadOfLine {
		t.Fatalf("ordered=true not applied: %s", sub.Capabilities())
	}
	if err := top.Publish(ctx, &broker.Message{ID: "u1", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil || ds[0].Message.ID != "u1" {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
