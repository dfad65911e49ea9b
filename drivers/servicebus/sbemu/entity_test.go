package sbemu_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

func subReceiver(t *testing.T, client *azservicebus.Client, topic, sub string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := client.NewReceiverForSubscription(topic, sub, opts)
	if err != nil {
		t.Fatalf("NewReceiverForSubscription(%s, %s): %v", topic, sub, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// A topic copies each message to every subscription; each subscription
// settles independently and has its own dead-letter queue.
func TestTopicFanOut(t *testing.T) {
	_, client := env(t, sbemu.Topology{Topics: []sbemu.Topic{{
		Name:          "orders",
		Subscriptions: []sbemu.Subscription{{Name: "billing"}, {Name: "shipping"}},
	}}})
	send(t, client, "orders", msg("o1"), msg("o2"))
	billing := subReceiver(t, client, "orders", "billing", nil)
	shipping := subReceiver(t, client, "orders", "shipping", nil)
	b := receiveN(t, billing, 2)
	s := receiveN(t, shipping, 2)
	for _, got := range [][]*azservicebus.ReceivedMessage{b, s} {
		if bodies(got)[0] != "o1" || bodies(got)[1] != "o2" {
			t.Fatalf("subscription got %v", bodies(got))
		}
	}
	// billing dead-letters o1 and completes o2; shipping completes both
	if err := billing.DeadLetterMessage(ctxT(t), b[0], &azservicebus.DeadLetterOptions{Reason: ptr("nope")}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}
	for _, m := range []*azservicebus.ReceivedMessage{b[1]} {
		if err := billing.CompleteMessage(ctxT(t), m, nil); err != nil {
			t.Fatalf("CompleteMessage: %v", err)
		}
	}
	for _, m := range s {
		if err := shipping.CompleteMessage(ctxT(t), m, nil); err != nil {
			t.Fatalf("CompleteMessage: %v", err)
		}
	}
	bdlq := subReceiver(t, client, "orders", "billing", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dead := receiveN(t, bdlq, 1)[0]
	if string(dead.Body) != "o1" || dead.DeadLetterReason == nil || *dead.DeadLetterReason != "nope" {
		t.Fatalf("billing dead-letter queue: %q reason %v", dead.Body, dead.DeadLetterReason)
	}
	sdlq := subReceiver(t, client, "orders", "shipping", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if peeked, err := sdlq.PeekMessages(ctxT(t), 10, nil); err != nil || len(peeked) != 0 {
		t.Fatalf("shipping dead-letter queue: %v %v", err, bodies(peeked))
	}
}

// Duplicate detection silently drops a message whose MessageId was seen
// within the window; other ids pass.
func TestDuplicateDetection(t *testing.T) {
	_, client := env(t, sbemu.Topology{
		Queues: []sbemu.Queue{{Name: "dedup", DuplicateDetectionWindow: 10 * time.Minute}},
		Topics: []sbemu.Topic{{Name: "dedupt", DuplicateDetectionWindow: 10 * time.Minute,
			Subscriptions: []sbemu.Subscription{{Name: "all"}}}},
	})
	withID := func(id, body string) *azservicebus.Message {
		return &azservicebus.Message{MessageID: &id, Body: []byte(body)}
	}
	for _, entity := range []string{"dedup", "dedupt"} {
		// the duplicate is accepted by the sender, as the service does
		send(t, client, entity, withID("k1", "first"), withID("k1", "dup"), withID("k2", "second"))
	}
	check := func(r *azservicebus.Receiver) {
		got := receiveN(t, r, 2)
		if bodies(got)[0] != "first" || bodies(got)[1] != "second" {
			t.Fatalf("got %v, want [first second]", bodies(got))
		}
		peeked, err := r.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
		if err != nil || len(peeked) != 2 {
			t.Fatalf("peek: %v %v (the duplicate must not be stored)", err, bodies(peeked))
		}
	}
	check(queueReceiver(t, client, "dedup", nil))
	check(subReceiver(t, client, "dedupt", "all", nil))
}

// Without duplicate detection the same MessageId is stored twice.
func TestNoDuplicateDetectionByDefault(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "nodedup"}}})
	id := "same"
	send(t, client, "nodedup", &azservicebus.Message{MessageID: &id, Body: []byte("1")}, &azservicebus.Message{MessageID: &id, Body: []byte("2")})
	got := receiveN(t, queueReceiver(t, client, "nodedup", nil), 2)
	if bodies(got)[0] != "1" || bodies(got)[1] != "2" {
		t.Fatalf("got %v", bodies(got))
	}
}

// Peek returns messages in sequence order from a sequence number without
// locking them or counting a delivery.
func TestPeek(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "peek"}}})
	send(t, client, "peek", msg("a"), msg("b"), msg("c"))
	r := queueReceiver(t, client, "peek", nil)
	first, err := r.PeekMessages(ctxT(t), 2, nil)
	if err != nil || len(first) != 2 || bodies(first)[0] != "a" || bodies(first)[1] != "b" {
		t.Fatalf("first peek: %v %v", err, bodies(first))
	}
	if first[0].LockedUntil != nil || first[0].LockToken != ([16]byte{}) {
		t.Fatalf("peeked message carries a lock: %v %x", first[0].LockedUntil, first[0].LockToken)
	}
	rest, err := r.PeekMessages(ctxT(t), 10, nil) // continues after the last peeked
	if err != nil || len(rest) != 1 || string(rest[0].Body) != "c" {
		t.Fatalf("second peek: %v %v", err, bodies(rest))
	}
	from, err := r.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: first[1].SequenceNumber})
	if err != nil || len(from) != 2 || string(from[0].Body) != "b" {
		t.Fatalf("peek from %d: %v %v", *first[1].SequenceNumber, err, bodies(from))
	}
	got := receiveN(t, r, 3)
	if got[0].DeliveryCount != 1 || string(got[0].Body) != "a" {
		t.Fatalf("peek changed the message: %q count %d", got[0].Body, got[0].DeliveryCount)
	}
}

// Scheduled messages (sender annotation and schedule-message) stay invisible
// to receivers until their time; cancel-scheduled-message removes one.
func TestScheduledMessages(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "sched"}}})
	sender, err := client.NewSender("sched", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	defer sender.Close(context.Background())
	at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	seqs, err := sender.ScheduleMessages(ctxT(t), []*azservicebus.Message{msg("keep"), msg("cancel")}, at, nil)
	if err != nil || len(seqs) != 2 || seqs[0] == seqs[1] {
		t.Fatalf("ScheduleMessages: %v %v", seqs, err)
	}
	if err := sender.CancelScheduledMessages(ctxT(t), []int64{seqs[1]}, nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}
	viaSend := msg("annotated")
	viaSend.ScheduledEnqueueTime = &at
	if err := sender.SendMessage(ctxT(t), viaSend, nil); err != nil {
		t.Fatalf("SendMessage (scheduled): %v", err)
	}
	r := queueReceiver(t, client, "sched", nil)
	peeked, err := r.PeekMessages(ctxT(t), 10, nil)
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	if time.Now().Before(at) {
		// still before the schedule: both pending messages are visible to
		// peek as scheduled, with their sequence numbers
		if len(peeked) != 2 || peeked[0].State != azservicebus.MessageStateScheduled ||
			*peeked[0].SequenceNumber != seqs[0] || peeked[0].ScheduledEnqueueTime == nil || !peeked[0].ScheduledEnqueueTime.Equal(at) {
			t.Fatalf("peek before the schedule: %v", describe(peeked))
		}
	}
	got := receiveN(t, r, 2)
	if now := time.Now(); now.Before(at) {
		t.Fatalf("scheduled messages delivered at %v, before %v", now, at)
	}
	if bodies(got)[0] != "keep" || bodies(got)[1] != "annotated" {
		t.Fatalf("got %v, want [keep annotated]", bodies(got))
	}
	for _, m := range got {
		if m.State != azservicebus.MessageStateActive || m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at) {
			t.Fatalf("delivered %q state %v scheduled %v", m.Body, m.State, m.ScheduledEnqueueTime)
		}
		if err := r.CompleteMessage(ctxT(t), m, nil); err != nil {
			t.Fatalf("CompleteMessage: %v", err)
		}
	}
	if left, err := r.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))}); err != nil || len(left) != 0 {
		t.Fatalf("cancelled message still there: %v %v", err, describe(left))
	}
}

// Scheduling on a topic holds the message at the topic; cancelling removes
// it from every subscription.
func TestScheduledOnTopic(t *testing.T) {
	_, client := env(t, sbemu.Topology{Topics: []sbemu.Topic{{Name: "tsched", Subscriptions: []sbemu.Subscription{{Name: "a"}, {Name: "b"}}}}})
	sender, err := client.NewSender("tsched", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	defer sender.Close(context.Background())
	at := time.Now().Add(time.Second)
	seqs, err := sender.ScheduleMessages(ctxT(t), []*azservicebus.Message{msg("x"), msg("gone")}, at, nil)
	if err != nil || len(seqs) != 2 {
		t.Fatalf("ScheduleMessages: %v %v", seqs, err)
	}
	if err := sender.CancelScheduledMessages(ctxT(t), []int64{seqs[1]}, nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}
	for _, sub := range []string{"a", "b"} {
		r := subReceiver(t, client, "tsched", sub, nil)
		got := receiveN(t, r, 1)[0]
		if string(got.Body) != "x" {
			t.Fatalf("subscription %s got %q", sub, got.Body)
		}
		if err := r.CompleteMessage(ctxT(t), got, nil); err != nil {
			t.Fatalf("CompleteMessage: %v", err)
		}
		receiveNone(t, r, 300*time.Millisecond)
	}
}

// A message past its time to live is dead-lettered (reason
// TTLExpiredException) when the entity says so, and dropped otherwise.
func TestTimeToLive(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{
		{Name: "ttl-dlq", DefaultMessageTimeToLive: 500 * time.Millisecond, DeadLetteringOnMessageExpiration: true},
		{Name: "ttl-drop", DefaultMessageTimeToLive: 500 * time.Millisecond},
		{Name: "ttl-msg"},
	}})
	send(t, client, "ttl-dlq", msg("expire-me"))
	send(t, client, "ttl-drop", msg("drop-me"))
	short := msg("short")
	short.TimeToLive = ptr(500 * time.Millisecond)
	send(t, client, "ttl-msg", short, msg("long"))

	dlq := queueReceiver(t, client, "ttl-dlq", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	dead, err := dlq.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(dead) != 1 {
		t.Fatalf("waiting for the expired message in the dead-letter queue: %v", err)
	}
	if string(dead[0].Body) != "expire-me" || dead[0].DeadLetterReason == nil || *dead[0].DeadLetterReason != "TTLExpiredException" {
		t.Fatalf("dead-lettered %q reason %v", dead[0].Body, dead[0].DeadLetterReason)
	}
	if dead[0].TimeToLive == nil || *dead[0].TimeToLive != 500*time.Millisecond {
		t.Fatalf("time to live %v, want the queue's default 500ms", dead[0].TimeToLive)
	}

	drop := queueReceiver(t, client, "ttl-drop", nil)
	waitEmpty(t, drop)
	dropDLQ := queueReceiver(t, client, "ttl-drop", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if peeked, err := dropDLQ.PeekMessages(ctxT(t), 10, nil); err != nil || len(peeked) != 0 {
		t.Fatalf("expired message dead-lettered without DeadLetteringOnMessageExpiration: %v %v", err, bodies(peeked))
	}

	// the message's own TimeToLive: the short one expires, the other stays
	perMsg := queueReceiver(t, client, "ttl-msg", nil)
	deadline := time.Now().Add(waitTimeout)
	for {
		peeked, err := perMsg.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
		if err != nil {
			t.Fatalf("PeekMessages: %v", err)
		}
		if len(peeked) == 1 {
			if string(peeked[0].Body) != "long" {
				t.Fatalf("kept %q, want long", peeked[0].Body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("short-lived message never expired: %v", bodies(peeked))
		}
		waitFor(t, 100*time.Millisecond)
	}
}

// waitEmpty polls peek until the entity is empty.
func waitEmpty(t *testing.T, r *azservicebus.Receiver) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		peeked, err := r.PeekMessages(ctxT(t), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
		if err != nil {
			t.Fatalf("PeekMessages: %v", err)
		}
		if len(peeked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still there: %v", bodies(peeked))
		}
		waitFor(t, 100*time.Millisecond)
	}
}

// An entity that does not exist is refused at attach.
func TestUnknownEntity(t *testing.T) {
	emu, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "known"}}})
	if emu.Real {
		t.Skip("needs an entity that surely does not exist")
	}
	sender, err := client.NewSender("no-such-queue", nil)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	defer sender.Close(context.Background())
	err = sender.SendMessage(ctxT(t), msg("x"), nil)
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotFound {
		t.Fatalf("send to a missing queue: %v, want amqp:not-found", err)
	}
}

func describe(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		seq := int64(-1)
		if m.SequenceNumber != nil {
			seq = *m.SequenceNumber
		}
		out[i] = fmt.Sprintf("%s#%d/%s", m.Body, seq, stateName(m.State))
	}
	return out
}

func stateName(s azservicebus.MessageState) string {
	switch s {
	case azservicebus.MessageStateDeferred:
		return "deferred"
	case azservicebus.MessageStateScheduled:
		return "scheduled"
	}
	return "active"
}
