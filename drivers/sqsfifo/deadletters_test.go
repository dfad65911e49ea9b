package sqsfifo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// TestOpenDeadLettersURL: a message dead-lettered through a subscription
// opened by URL is read back with its reason through broker.OpenDeadLetters
// on the consumer's own URL (its RedrivePolicy's queue).
func TestOpenDeadLettersURL(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{})
	if e.srv.Real {
		t.Skip("opens fauxqs with dummy credentials from the environment; WARY_SQS_ENDPOINT set")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret-never-printed")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	url, dlqURL := e.createQueue(t, sqsemu.QueueSpec{Visibility: 5 * time.Second, MaxReceive: 5})
	plain, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 5 * time.Second})
	name := url[strings.LastIndex(url, "/")+1:]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := "?region=us-east-1&endpoint=" + e.srv.Endpoint
	subURL := "sqsfifo://" + name + q + "&wait_time=1s"

	top, err := broker.OpenTopic(ctx, "sqsfifo://"+name+q)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "poison", Key: "g", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := receiveOne(ctx, t, sub).DeadLetter(ctx, "cannot parse"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(ctx, t, dlqURL); n != 1 {
		t.Fatalf("the DLQ holds %d messages, want 1", n)
	}

	dead, err := broker.OpenDeadLetters(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	d := receiveOne(ctx, t, dead)
	if d.Message.ID != "poison" || d.Message.Key != "g" || d.Message.Headers.Get(driver.HeaderDeadLetterReason) != "cannot parse" {
		t.Fatalf("dead letter %+v", d.Message)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(ctx, t, dlqURL); n != 0 {
		t.Fatalf("after the ack the DLQ holds %d messages", n)
	}

	plainName := plain[strings.LastIndex(plain, "/")+1:]
	for _, c := range []struct {
		url  string
		want error
	}{
		{"sqsfifo://" + plainName + q, broker.ErrInvalid}, // no RedrivePolicy
		{"sqsfifo://missing-" + sqsemu.UniqueName("q") + ".fifo" + q, broker.ErrNotFound},
		{subURL + "&colour=red", broker.ErrInvalid},
	} {
		if _, err := broker.OpenDeadLetters(ctx, c.url); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.url, err, c.want)
		}
	}
}
