package gcppubsub_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/gcppubsub"
)

// TestSource: the capabilities come from the live configuration, and
// Source says so: the subscription's settings (exactly-once among them,
// which no field states), the topic's subscriptions' ordering; a topic
// told not to send ordering keys while a subscription orders reports the
// conflict, with the broker's side as what applies.
func TestSource(t *testing.T) {
	e := newTestEnv(t)
	c := e.create(t, subSpec{AckDeadline: 20 * time.Second, Ordering: true, ExactlyOnce: true, MaxAttempts: 7, Retention: time.Hour})
	top, sub := e.open(t, c)
	sc := sub.Capabilities()
	if sc.LockTimeout != 20*time.Second || sc.DeliveryLimit != 7 || sc.RedeliveryHorizon != time.Hour || sc.Ordering != capability.OrderMessageGroup {
		t.Errorf("subscription capabilities %s, want lock 20s, limit 7, horizon 1h, ordering per message group", sc)
	}
	for _, want := range []string{"GetSubscription", "ack deadline 20s", "exactly-once delivery on", "after 7 delivery attempts", "message ordering on"} {
		if !strings.Contains(sc.Source.Read, want) {
			t.Errorf("subscription Source.Read lacks %q: %s", want, sc.Source.Read)
		}
	}
	if tc := top.Capabilities(); tc.OrderingKey == "" || !strings.Contains(tc.Source.Read, "message ordering on in") || len(tc.Source.Conflicts) != 0 {
		t.Errorf("topic capabilities %s, Source %+v: want ordering keys, read from the subscriptions, no conflict", tc, tc.Source)
	}

	off, err := gcppubsub.OpenTopic(t.Context(), e.client, c.Topic, &gcppubsub.TopicOptions{Ordering: gcppubsub.OrderingOff})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	tc := off.Capabilities()
	if tc.OrderingKey != "" || len(tc.Source.Conflicts) != 1 || tc.Source.Conflicts[0].Setting != capability.SettingOrdering {
		t.Fatalf("topic with ordering off: %s, Source %+v: want no ordering keys and one ordering conflict", tc, tc.Source)
	}
	t.Logf("conflict: %+v", tc.Source.Conflicts[0])
}
