package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type fixture struct {
	b     *memory.Broker
	clock *memory.FakeClock
	topic *broker.Topic
	t     *testing.T
}

// newFixture creates topic "t" with subscription "s" on a fake clock.
func newFixture(t *testing.T, cfg memory.TopicConfig) *fixture {
	t.Helper()
	clock := memory.NewFakeClock(t0)
	b := memory.New(&memory.Options{Clock: clock})
	if err := b.CreateTopic("t", &cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription("t", "s"); err != nil {
		t.Fatal(err)
	}
	top, err := b.OpenTopic("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { top.Close() })
	return &fixture{b: b, clock: clock, topic: top, t: t}
}

func (f *fixture) sub() *broker.Subscription {
	f.t.Helper()
	s, err := f.b.OpenSubscription("t", "s", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

func (f *fixture) dlq() *broker.Subscription {
	f.t.Helper()
	s, err := f.b.OpenDeadLetters("t", "s", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

func (f *fixture) publish(msgs ...*broker.Message) {
	f.t.Helper()
	if err := f.topic.Publish(context.Background(), msgs...); err != nil {
		f.t.Fatal(err)
	}
}

// poll returns what is deliverable now, without waiting.
func poll(t *testing.T, s *broker.Subscription, n int) []*broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ds, err := s.Receive(ctx, n)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("receive: %v", err)
	}
	return ds
}

// pollOne expects exactly one deliverable message, with the given ID.
func pollOne(t *testing.T, s *broker.Subscription, id string) *broker.Delivery {
	t.Helper()
	ds := poll(t, s, 10)
	if len(ds) != 1 || ds[0].Message.ID != id {
		t.Fatalf("got %s, want exactly [%s]", ids(ds), id)
	}
	return ds[0]
}

func ids(ds []*broker.Delivery) string {
	s := "["
	for i, d := range ds {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s#%d", d.Message.ID, d.Attempt)
	}
	return s + "]"
}

func msg(id, key string) *broker.Message {
	return &broker.Message{ID: id, Key: key, Body: []byte("body-" + id)}
}

var bg = context.Background()

func TestLockExpiry(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{LockTimeout: 10 * time.Second})
	s := f.sub()
	f.publish(msg("a", ""))
	d1 := pollOne(t, s, "a")
	if d1.Attempt != 1 || d1.Redelivered || !d1.PublishTime.Equal(t0) {
		t.Fatalf("first delivery: attempt %d redelivered %t publish time %v", d1.Attempt, d1.Redelivered, d1.PublishTime)
	}
	f.clock.Advance(10*time.Second - 1)
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("redelivered before the lock expired: %s", ids(ds))
	}
	f.clock.Advance(1)
	d2 := pollOne(t, s, "a")
	if d2.Attempt != 2 || !d2.Redelivered {
		t.Fatalf("redelivery: attempt %d redelivered %t", d2.Attempt, d2.Redelivered)
	}
	if err := d1.Ack(bg); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("ack with an expired lock: %v, want ErrLockLost", err)
	}
	if err := d2.Ack(bg); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("acked message delivered again: %s", ids(ds))
	}
}

func TestExtendLock(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{LockTimeout: 10 * time.Second})
	s := f.sub()
	f.publish(msg("a", ""))
	d := pollOne(t, s, "a")
	f.clock.Advance(8 * time.Second)
	if err := d.ExtendLock(bg, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(9 * time.Second) // 17s after delivery, 9s after the extension
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("redelivered while the extended lock held: %s", ids(ds))
	}
	f.clock.Advance(time.Second)
	d2 := pollOne(t, s, "a")
	if err := d.ExtendLock(bg, time.Minute); !errors.Is(err, broker.ErrLockLost) {
		t.Fatalf("extend after expiry: %v, want ErrLockLost", err)
	}
	if err := d2.Ack(bg); err != nil {
		t.Fatal(err)
	}
}

func TestNackDelay(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	s := f.sub()
	f.publish(msg("a", ""), msg("b", ""))
	ds := poll(t, s, 1)
	if ids(ds) != "[a#1]" {
		t.Fatalf("got %s, want the oldest first", ids(ds))
	}
	if err := ds[0].Nack(bg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	pollOne(t, s, "b") // b is not held back by a's delay
	f.clock.Advance(5*time.Second - 1)
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("delivered before the nack delay: %s", ids(ds))
	}
	f.clock.Advance(1)
	if d := pollOne(t, s, "a"); d.Attempt != 2 {
		t.Fatalf("attempt %d after a nack, want 2", d.Attempt)
	}
}

func TestDeliveryLimit(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{DeliveryLimit: 2, LockTimeout: time.Second})
	s, dlq := f.sub(), f.dlq()
	f.publish(&broker.Message{ID: "a", Key: "k", Headers: broker.Headers{{"h", "v"}}, Body: []byte{0xff, 0}})
	if err := pollOne(t, s, "a").Nack(bg, 0); err != nil {
		t.Fatal(err)
	}
	pollOne(t, s, "a")           // attempt 2, the last one
	f.clock.Advance(time.Second) // the lock expires: the limit is reached
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("delivered beyond the limit: %s", ids(ds))
	}
	d := pollOne(t, dlq, "a")
	m := d.Message
	if m.Key != "k" || m.Headers.Get("h") != "v" || string(m.Body) != "\xff\x00" || d.Attempt != 1 {
		t.Fatalf("dead letter changed: %+v attempt %d", m, d.Attempt)
	}
	if got := m.Headers.Get(driver.HeaderDeadLetterReason); got != "delivery limit exceeded (2)" {
		t.Fatalf("reason %q", got)
	}
	if err := d.Ack(bg); err != nil {
		t.Fatal(err)
	}
}

func TestDeadLetter(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	s, dlq := f.sub(), f.dlq()
	f.publish(msg("a", ""))
	d := pollOne(t, s, "a")
	if err := d.DeadLetter(bg, "poison"); err != nil {
		t.Fatal(err)
	}
	if got := pollOne(t, dlq, "a").Message.Headers.Get(driver.HeaderDeadLetterReason); got != "poison" {
		t.Fatalf("reason %q", got)
	}
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("dead-lettered message delivered again: %s", ids(ds))
	}
	if !dlq.Capabilities().LockExtendable || dlq.Capabilities().DeliveryLimit != 0 || dlq.Capabilities().DeadLetter {
		t.Fatalf("dead-letter queue capabilities: %v", dlq.Capabilities())
	}
}

// TestSource: the embedded broker's configuration is the broker: every
// side says it was read from it, and nothing is unread.
func TestSource(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{})
	for _, c := range []struct {
		src  capability.Source
		want string
	}{
		{f.topic.Capabilities().Source, "the embedded broker's configuration of topic t"},
		{f.sub().Capabilities().Source, "the embedded broker's configuration of subscription t/s"},
		{f.dlq().Capabilities().Source, "the embedded broker's configuration of subscription t/s/$deadletter"},
	} {
		if c.src.Read != c.want || len(c.src.Unread) != 0 || len(c.src.Conflicts) != 0 {
			t.Errorf("source %+v, want read from %q", c.src, c.want)
		}
	}
}

// TestSourceURLConflict: a URL's parameters do not change an existing
// topic; those that state another value than it holds are conflicts, on
// the side the URL opens, with their fix.
func TestSourceURLConflict(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	mux := urlMux(b)
	top, err := mux.OpenTopic(bg, "mem://orders?profile=sqsfifo&limit=10&lock=30s")
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if src := top.Capabilities().Source; len(src.Conflicts) != 0 || src.Read == "" {
		t.Fatalf("creating URL: %+v", src)
	}
	// limit differs, lock agrees, dedup (not given) is not compared.
	sub, err := mux.OpenSubscription(bg, "mem://orders/billing?limit=5&lock=30s")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	c := sub.Capabilities()
	if c.DeliveryLimit != 10 || len(c.Source.Conflicts) != 1 {
		t.Fatalf("subscription %s %+v", c, c.Source)
	}
	cf := c.Source.Conflicts[0]
	if cf.Setting != capability.SettingDeliveryLimit || cf.Stated != "5 (limit in the URL)" || cf.Held != "10 (topic orders's configuration)" || !strings.HasPrefix(cf.Fix, "drop limit from the URL") {
		t.Fatalf("conflict %+v", cf)
	}
	top2, err := mux.OpenTopic(bg, "mem://orders?dedup=-1s")
	if err != nil {
		t.Fatal(err)
	}
	defer top2.Close()
	if cs := top2.Capabilities().Source.Conflicts; len(cs) != 1 || cs[0].Stated != "none (dedup in the URL)" || cs[0].Held != "5m0s (topic orders's configuration)" {
		t.Fatalf("topic conflicts %+v", cs)
	}
	// A topic or subscription that does not exist: the defaults are
	// stated as unread.
	missing, err := b.OpenTopic("nowhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Close()
	if src := missing.Capabilities().Source; src.Read != "" || !src.IsUnread(capability.SettingDedupWindow) || !strings.Contains(src.Unread[0].Why, "topic nowhere does not exist") {
		t.Fatalf("missing topic: %+v", src)
	}
	nosub, err := b.OpenSubscription("orders", "nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nosub.Close()
	if src := nosub.Capabilities().Source; !src.IsUnread(capability.SettingDeliveryLimit) {
		t.Fatalf("missing subscription: %+v", src)
	}
}

func TestSQSFIFOHeadOfLine(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{Profile: memory.SQSFIFO})
	s1, s2 := f.sub(), f.sub()
	f.publish(msg("a1", "a"), msg("a2", "a"), msg("b1", "b"), msg("a3", "a"))
	ds := poll(t, s1, 10)
	if got := ids(ds); got != "[a1#1 b1#1]" {
		t.Fatalf("first receive %s, want one message per group", got)
	}
	if got := ids(poll(t, s2, 10)); got != "[]" {
		t.Fatalf("competing consumer got %s while the groups are in flight", got)
	}
	// Ack b1, nack a1 with a delay: group a stays blocked by a1.
	if err := ds[1].Ack(bg); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].Nack(bg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := ids(poll(t, s2, 10)); got != "[]" {
		t.Fatalf("got %s while a1 waits out its nack delay", got)
	}
	f.clock.Advance(5 * time.Second)
	d := pollOne(t, s2, "a1")
	if d.Attempt != 2 {
		t.Fatalf("attempt %d", d.Attempt)
	}
	if err := d.Ack(bg); err != nil {
		t.Fatal(err)
	}
	if err := pollOne(t, s2, "a2").Ack(bg); err != nil {
		t.Fatal(err)
	}
	pollOne(t, s1, "a3")
}

// TestAckAllLockLostAlone: of a batch acked with broker.AckAll (one
// SendAcks), the delivery whose lock expired is reported alone as
// ErrLockLost; the others are acknowledged and never come back.
func TestAckAllLockLostAlone(t *testing.T) {
	f := newFixture(t, memory.TopicConfig{LockTimeout: 10 * time.Second})
	s := f.sub()
	f.publish(msg("a", ""))
	old := pollOne(t, s, "a")
	f.clock.Advance(6 * time.Second)
	f.publish(msg("b", ""), msg("c", ""))
	fresh := poll(t, s, 10)
	if len(fresh) != 2 {
		t.Fatalf("got %s, want b and c", ids(fresh))
	}
	f.clock.Advance(5 * time.Second) // a's lock expired, b's and c's hold
	errs := broker.AckAll(bg, []*broker.Delivery{fresh[0], old, fresh[1]})
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], broker.ErrLockLost) || errs[2] != nil {
		t.Fatalf("AckAll: %v, want [nil ErrLockLost nil]", errs)
	}
	again := pollOne(t, s, "a") // only a comes back
	if err := again.Ack(bg); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	if ds := poll(t, s, 10); len(ds) != 0 {
		t.Fatalf("acked messages delivered again: %s", ids(ds))
	}
}
