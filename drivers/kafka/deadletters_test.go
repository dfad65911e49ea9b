package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestOpenDeadLettersURL: records dead-lettered through a subscription
// opened by URL, on demand and by the delivery limit, are read back with
// their reason through broker.OpenDeadLetters on the consumer's own URL,
// by the group GROUP.dead-letters.
func TestOpenDeadLettersURL(t *testing.T) {
	e := newTestEnv(t)
	topic, dlt := e.createTopic(t, 1, "dlurl"), e.createTopic(t, 1, "dlurl-dlq")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := e.seeds[0]
	group := uniqueName("g")
	subURL := "kafka://" + group + "?topic=" + topic + "&brokers=" + brokers + "&dead_letter_topic=" + dlt + "&delivery_limit=2"

	top, err := broker.OpenTopic(ctx, "kafka://"+topic+"?brokers="+brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, id := range []string{"poison", "limit"} {
		if err := top.Publish(ctx, &broker.Message{ID: id, Body: []byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
	// "poison" is dead-lettered on demand; "limit" is nacked until the
	// delivery limit dead-letters it (two deliveries).
	for settled := 0; settled < 3; {
		ds, err := sub.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Message.ID == "poison" {
				err = d.DeadLetter(ctx, "cannot parse")
			} else {
				err = d.Nack(ctx, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			settled++
		}
	}

	dl, err := broker.OpenDeadLetters(ctx, subURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	got := map[string]string{}
	for len(got) < 2 {
		ds, err := dl.Receive(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[d.Message.ID] = d.Message.Headers[driver.HeaderDeadLetterReason]
			if d.Message.Headers[kafka.HeaderDeadLetterSource] == "" {
				t.Errorf("%s: no %s", d.Message.ID, kafka.HeaderDeadLetterSource)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got["poison"] != "cannot parse" || got["limit"] != "delivery limit of 2 reached" {
		t.Fatalf("dead letters and reasons: %q", got)
	}
	// The acks committed the dead-letter group's offsets.
	offs, err := e.admin.FetchOffsets(ctx, group+kafka.DeadLetterGroupSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(dlt, 0); !ok || o.At != 2 {
		t.Fatalf("committed offset of %s%s on the dead-letter topic: %+v %t, want 2", group, kafka.DeadLetterGroupSuffix, o, ok)
	}

	for _, bad := range []string{
		"kafka://" + group + "?topic=" + topic + "&brokers=" + brokers,                                        // no dead-letter topic
		"kafka://" + group + "?topic=" + topic + "&brokers=" + brokers + "&dead_letter_topic=" + dlt + "&x=1", // unknown parameter
		"kafka://" + group + "?brokers=" + brokers + "&dead_letter_topic=" + dlt,                              // no topic
	} {
		if _, err := broker.OpenDeadLetters(ctx, bad); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
	missing := "kafka://" + group + "?topic=" + topic + "&brokers=" + brokers + "&dead_letter_topic=" + uniqueName("absent")
	if _, err := broker.OpenDeadLetters(ctx, missing); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("missing dead-letter topic: %v, want ErrNotFound", err)
	}
}
