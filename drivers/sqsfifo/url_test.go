package sqsfifo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

func TestURLInvalid(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"sqsfifo://q.fifo?bogus=1",
		"sqsfifo://q.fifo?wait_time=secret-value",
		"sqsfifo://q.fifo?wait_time=30s",
		"sqsfifo://q.fifo?dedup_window=secret-value",
		"sqsfifo://user:secret-value@q.fifo",
		"sqsfifo://q.fifo?endpoint=secret-value",
		"sqsfifo://",
	} {
		_, err := broker.OpenSubscription(ctx, u)
		if !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
			continue
		}
		if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%s: the error echoes the value: %v", u, err)
		}
	}
	if _, err := broker.OpenTopic(ctx, "sqsfifo://q.fifo?wait_time=1s"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("wait_time on a topic: %v, want ErrInvalid", err)
	}
}

func TestURLOpen(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	if e.srv.Real {
		t.Skip("opens fauxqs with dummy credentials from the environment; WARY_SQS_ENDPOINT set")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret-never-printed")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 5 * time.Second})
	name := url[strings.LastIndex(url, "/")+1:]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := "?region=us-east-1&endpoint=" + e.srv.Endpoint
	top, err := broker.OpenTopic(ctx, "sqsfifo://"+name+q+"&dedup_window=1m")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if top.Capabilities().DedupWindow != time.Minute {
		t.Fatalf("dedup_window not applied: %s", top.Capabilities())
	}
	sub, err := broker.OpenSubscription(ctx, "sqsfifo://"+name+q+"&wait_time=1s&dedup_window=1m")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "u1", Key: "k", Body: []byte("via URL")}); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(ds[0].Message.Body) != "via URL" {
		t.Fatalf("body %q", ds[0].Message.Body)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = broker.OpenTopic(ctx, "sqsfifo://missing-queue.fifo"+q)
	if !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("missing queue: %v, want ErrNotFound", err)
	}
	if strings.Contains(err.Error(), "test-secret-never-printed") {
		t.Fatalf("error prints the secret: %v", err)
	}
}
