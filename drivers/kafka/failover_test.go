package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestFailoverAfterKill: a consumer dies without leaving the group (its
// LeaveGroup is refused, as if the process were killed), and the other
// member of the group takes its partitions over once the dead member's
// session expires. The driver's default session timeout (not kgo's 45s)
// is what the client uses, and a caller's own option wins over it.
func TestFailoverAfterKill(t *testing.T) {
	e := newTestEnv(t)
	requireFake(t, e)
	topic := e.createTopic(t, 4, "failover")
	group := uniqueName("g")
	ctx := context.Background()
	// No session options: the driver's defaults apply.
	opts := []kgo.Opt{kgo.SeedBrokers(e.seeds...), kgo.FetchMaxWait(500 * time.Millisecond)}

	newClient := func(extra ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(append(kafka.SubscriptionOpts(group), opts...), extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a, err := kafka.OpenSubscription(ctx, newClient(), topic, group, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	acl := clientOf(t, a)
	if got := acl.OptValue(kgo.SessionTimeout); got != kafka.DefaultSessionTimeout {
		t.Fatalf("session timeout %v, want the driver's default %v", got, kafka.DefaultSessionTimeout)
	}
	if got := acl.OptValue(kgo.HeartbeatInterval); got != kafka.DefaultHeartbeatInterval {
		t.Fatalf("heartbeat interval %v, want the driver's default %v", got, kafka.DefaultHeartbeatInterval)
	}
	if err := waitJoined(ctx, e.admin, a, group); err != nil {
		t.Fatal(err)
	}

	// The caller's option wins over the driver's default.
	const own = 7 * time.Second
	b, err := kafka.OpenSubscription(ctx, newClient(kgo.SessionTimeout(own)), topic, group, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bcl := clientOf(t, b)
	if got := bcl.OptValue(kgo.SessionTimeout); got != own {
		t.Fatalf("session timeout %v, want the caller's %v", got, own)
	}
	var aMember, bMember string
	if err := waitGroup(ctx, e, group, func(assigned map[string]int) bool {
		aMember, _ = acl.GroupMetadata()
		bMember, _ = bcl.GroupMetadata()
		return len(assigned) == 2 && assigned[aMember] > 0 && assigned[bMember] > 0
	}); err != nil {
		t.Fatalf("the two consumers never shared the partitions: %v", err)
	}

	// Kill a: its LeaveGroup is refused, so the broker keeps it as a member
	// (with its partitions) until its session expires.
	kill := e.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.LeaveGroup}, Group: group, Resource: aMember, Err: kerr.UnknownServerError, Count: -1})
	defer kill.Remove()
	killed := time.Now()
	_ = a.Close()
	if kill.Hits() == 0 {
		t.Fatalf("a's LeaveGroup was never sent")
	}
	if assigned, err := describeAssigned(ctx, e, group); err != nil || assigned[aMember] == 0 {
		t.Fatalf("a left the group although its LeaveGroup was refused (%v, %v): the kill is not a kill", assigned, err)
	}

	top, err := kafka.OpenTopic(ctx, e.topicClient(t), topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	const n = 40
	for i := range n {
		if err := top.Publish(ctx, &broker.Message{ID: fmt.Sprint("m-", i), Key: fmt.Sprint(i), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// b gets every record, those of a's partitions included, once a's
	// session expires. The deadline only bounds a failing run.
	got := map[string]bool{}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(got) < n {
		ds, err := b.Receive(rctx, n)
		if err != nil {
			t.Fatalf("b received %d of %d records (a's partitions never moved): %v", len(got), n, err)
		}
		for _, d := range ds {
			got[d.Message.ID] = true
			if err := d.Ack(rctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("b took over a's partitions %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if assigned, err := describeAssigned(ctx, e, group); err != nil || len(assigned) != 1 || assigned[bMember] != 4 {
		t.Fatalf("group after the takeover: %v, %v; want b alone with 4 partitions", assigned, err)
	}
}

func clientOf(t *testing.T, s *broker.Subscription) *kgo.Client {
	t.Helper()
	var cl *kgo.Client
	if !s.As(&cl) {
		t.Fatal("As(**kgo.Client) failed")
	}
	return cl
}

// describeAssigned returns, for a stable group, how many partitions each
// member holds (nil while the group rebalances).
func describeAssigned(ctx context.Context, e *testEnv, group string) (map[string]int, error) {
	gs, err := e.admin.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	g, ok := gs[group]
	if !ok || g.State != "Stable" {
		return nil, nil
	}
	assigned := map[string]int{}
	for _, m := range g.Members {
		n := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				n += len(t.Partitions)
			}
		}
		assigned[m.MemberID] = n
	}
	return assigned, nil
}

// waitGroup waits until the stable group's assignment satisfies cond.
func waitGroup(ctx context.Context, e *testEnv, group string, cond func(map[string]int) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last map[string]int
	for {
		if assigned, err := describeAssigned(ctx, e, group); err == nil && assigned != nil {
			if cond(assigned) {
				return nil
			}
			last = assigned
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("last assignment %v: %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
