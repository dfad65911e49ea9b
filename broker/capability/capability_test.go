package capability_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// TestHorizonString: the two horizons that are not a length of time are
// named, and a negative horizon (no driver states one) reads as unknown,
// never as a duration an inbox could keep its records for.
func TestHorizonString(t *testing.T) {
	for h, want := range map[time.Duration]string{
		capability.HorizonUnknown:   "unknown",
		capability.HorizonUnbounded: "unbounded",
		-time.Second:                "unknown",
		14 * 24 * time.Hour:         "336h0m0s",
	} {
		if got := capability.HorizonString(h); got != want {
			t.Errorf("HorizonString(%d) = %q, want %q", h, got, want)
		}
	}
}

// TestSubscriptionStringLock: a lock timeout the driver could not read is
// stated as unknown, whatever the field holds (the URL's value or the
// driver's default); LockNone reads as none, and 0 as the duration it is
// (held until settled), not as none.
func TestSubscriptionStringLock(t *testing.T) {
	unread := capability.Source{Unread: []capability.Unread{{Setting: capability.SettingLockTimeout, Why: "consumer_timeout is not readable", Fix: "enable the management plugin"}}}
	for _, c := range []struct {
		name string
		sub  capability.Subscription
		want string
	}{
		{"read", capability.Subscription{LockTimeout: 30 * time.Minute}, "lock=30m0s"},
		{"unread", capability.Subscription{LockTimeout: 30 * time.Minute, Source: unread}, "lock=unknown"},
		{"none", capability.Subscription{LockTimeout: capability.LockNone}, "lock=none"},
		{"until settled", capability.Subscription{}, "lock=0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.sub.String(); !strings.Contains(got, c.want) {
				t.Errorf("String() = %q, want it to contain %q", got, c.want)
			}
		})
	}
}

// TestEnumStrings: each value has its name, and a value no constant
// names is printed as its number, not as a neighbour's name.
func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		got  fmt.Stringer
		want string
	}{
		{capability.OrderNone, "none"},
		{capability.OrderQueue, "queue"},
		{capability.OrderPartition, "partition"},
		{capability.OrderMessageGroup, "message group"},
		{capability.OrderSession, "session"},
		{capability.OrderingScope(42), "OrderingScope(42)"},
		{capability.DedupNone, "none"},
		{capability.DedupQueue, "queue"},
		{capability.DedupMessageGroup, "message group"},
		{capability.DedupScope(7), "DedupScope(7)"},
		{capability.AckPerMessage, "per message"},
		{capability.AckCumulative, "cumulative"},
		{capability.LimitNone, "none"},
		{capability.LimitNative, "native"},
		{capability.LimitEmulated, "emulated"},
	} {
		if s := c.got.String(); s != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.got, s, c.want)
		}
	}
}

// TestIsUnread: only the settings listed as unread are.
func TestIsUnread(t *testing.T) {
	src := capability.Source{Read: "quorum queue q", Unread: []capability.Unread{{Setting: capability.SettingDeliveryLimit}}}
	if !src.IsUnread(capability.SettingDeliveryLimit) {
		t.Error("the delivery limit is listed as unread, IsUnread says it was read")
	}
	if src.IsUnread(capability.SettingDeadLetter) {
		t.Error("the dead-letter target is not listed as unread, IsUnread says it is")
	}
	if (capability.Source{}).IsUnread(capability.SettingOrdering) {
		t.Error("an empty Source lists nothing as unread")
	}
}

// A RabbitMQ quorum queue's promise to its consumer, as a driver declares
// it after reading the queue and its policy: what it could not read (the
// lock's bound) is stated as unknown.
func ExampleSubscription_String() {
	sub := capability.Subscription{
		Ordering:          capability.OrderQueue,
		HeadOfLine:        true,
		DeliveryCount:     true,
		DeliveryLimit:     20,
		DeliveryLimitMode: capability.LimitNative,
		DeadLetter:        true,
		LockTimeout:       30 * time.Minute,
		RedeliveryHorizon: capability.HorizonUnbounded,
		Source: capability.Source{
			Read:   "quorum queue shop.billing and its policy, through the management API",
			Unread: []capability.Unread{{Setting: capability.SettingLockTimeout, Why: "consumer_timeout is a node setting", Fix: "state it in the URL"}},
		},
	}
	fmt.Println(sub)
	// Output:
	// ordering=queue head-of-line ack=per message delivery-limit=20(native) dead-letter=true count=true lock=unknown extend=false nack-delay=false horizon=unbounded
}

// An SQS FIFO queue's promise to a publisher.
func ExampleTopic_String() {
	top := capability.Topic{
		OrderingKey:    "MessageGroupId",
		KeyRequired:    true,
		DedupWindow:    5 * time.Minute,
		DedupScope:     capability.DedupQueue,
		MaxMessageSize: 262144,
		MaxBatchSize:   10,
	}
	fmt.Println(top)
	// Output:
	// key=MessageGroupId key-required dedup=5m0s/queue max-size=262144 max-batch=10
}
