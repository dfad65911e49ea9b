package kafka_test

import (
	"context"
	"errors"
	"strings"
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
			got[d.Message.ID] = d.Message.Headers.Get(driver.HeaderDeadLetterReason)
			if d.Message.Headers.Get(kafka.HeaderDeadLetterSource) == "" {
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

// TestOpenDeadLetters: kafka.OpenDeadLetters reads a dead-letter topic as
// the program's group client, with each dead letter's reason and source;
// OpenSubscription on the same topic drops those headers, and a
// subscription URL with dead_letters=true reads as OpenDeadLetters does.
// It refuses a client built for another group (a *kafka.ClientError
// naming OpenDeadLetters), an empty group, and an absent topic.
func TestOpenDeadLetters(t *testing.T) {
	e := newTestEnv(t)
	topic, dlt := e.createTopic(t, 1, "dlopen"), e.createTopic(t, 1, "dlopen-dlq")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "poison", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	sub, err := e.openSub(ctx, t, topic, uniqueName("g"), &kafka.SubscriptionOptions{DeadLetterTopic: dlt})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := receiveOne(ctx, t, "receive", sub).DeadLetter(ctx, "cannot parse"); err != nil {
		t.Fatal(err)
	}

	// takeDead takes the one dead letter from s, acks it, and closes s.
	takeDead := func(what string, s *broker.Subscription) broker.Headers {
		t.Helper()
		defer s.Close()
		d := receiveOne(ctx, t, what, s)
		if d.Message.ID != "poison" {
			t.Fatalf("%s: received %q, want the dead letter", what, d.Message.ID)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		return d.Message.Headers
	}

	group := uniqueName("g") + kafka.DeadLetterGroupSuffix
	dl, err := kafka.OpenDeadLetters(ctx, e.subClient(t, group), dlt, group, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := takeDead("OpenDeadLetters", dl)
	if h.Get(driver.HeaderDeadLetterReason) != "cannot parse" || !strings.HasPrefix(h.Get(kafka.HeaderDeadLetterSource), topic+"/0@") {
		t.Errorf("OpenDeadLetters: headers %v, want the reason and source", h)
	}
	offs, err := e.admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(dlt, 0); !ok || o.At != 1 {
		t.Errorf("committed offset of %s on the dead-letter topic: %+v %t, want 1", group, o, ok)
	}

	plain, err := e.openSub(ctx, t, dlt, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := takeDead("OpenSubscription", plain); h.Get(driver.HeaderDeadLetterReason) != "" || h.Get(kafka.HeaderDeadLetterSource) != "" {
		t.Errorf("OpenSubscription on the dead-letter topic: headers %v, want no dead-letter headers", h)
	}

	byURL, err := broker.OpenSubscription(ctx, "kafka://"+uniqueName("g")+"?topic="+dlt+"&brokers="+e.seeds[0]+"&dead_letters=true")
	if err != nil {
		t.Fatal(err)
	}
	if h := takeDead("dead_letters=true", byURL); h.Get(driver.HeaderDeadLetterReason) != "cannot parse" {
		t.Errorf("dead_letters=true: headers %v, want the reason", h)
	}

	_, err = kafka.OpenDeadLetters(ctx, e.subClient(t, "other"), dlt, uniqueName("g"), nil)
	var ce *kafka.ClientError
	if !errors.Is(err, broker.ErrInvalid) || !errors.As(err, &ce) || ce.Func != "OpenDeadLetters" {
		t.Errorf("client of another group: %v, want ErrInvalid with a *kafka.ClientError of OpenDeadLetters", err)
	}
	if _, err := kafka.OpenDeadLetters(ctx, e.subClient(t, "g"), dlt, "", nil); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("no group: %v, want ErrInvalid", err)
	}
	absent := uniqueName("g")
	if _, err := kafka.OpenDeadLetters(ctx, e.subClient(t, absent), uniqueName("absent"), absent, nil); !errors.Is(err, broker.ErrNotFound) {
		t.Errorf("absent topic: %v, want ErrNotFound", err)
	}
}
