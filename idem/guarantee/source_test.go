package guarantee_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/guarantee"
)

// TestSourceUnreadIsUnknown: a delivery limit the driver could not read is
// stated as unknown, with how to read it, and is not flagged as missing.
func TestSourceUnreadIsUnknown(t *testing.T) {
	sub := capability.Subscription{Ordering: capability.OrderQueue, RedeliveryHorizon: capability.HorizonUnbounded,
		Source: capability.Source{Unread: []capability.Unread{{Setting: capability.SettingDeliveryLimit, Why: "the management API did not answer", Fix: "enable rabbitmq_management"}}}}
	st := guarantee.Explain(guarantee.Pipeline{Subscription: &sub, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}})
	if !st.OK() {
		t.Fatalf("findings for an unread limit: %+v", st.Findings)
	}
	if len(st.Unread) != 1 || st.Unread[0].Fix != "enable rabbitmq_management" {
		t.Fatalf("unread: %+v", st.Unread)
	}
	tr := st.Lines[1]
	if tr.Verdict != guarantee.VerdictWeak || !strings.Contains(tr.Text, "delivery limit unknown") || !strings.Contains(tr.Text, "subscription not read from the broker (delivery limit unknown)") {
		t.Fatalf("transport line: %+v", tr)
	}
	if s := st.String(); !strings.Contains(s, "UNKNOWN (transport): the subscription's delivery limit could not be read from the broker: the management API did not answer\n  to read it: enable rabbitmq_management") {
		t.Fatalf("statement:\n%s", s)
	}
}

// TestSourceConflictIsFinding: a URL that states another limit than the
// broker holds is a misconfiguration; the broker's value is the one stated.
func TestSourceConflictIsFinding(t *testing.T) {
	sub := capability.Subscription{Ordering: capability.OrderQueue, DeliveryLimit: 20, DeliveryLimitMode: capability.LimitNative, DeadLetter: true,
		RedeliveryHorizon: time.Hour,
		Source: capability.Source{Read: "quorum queue q through the management API",
			Conflicts: []capability.Conflict{{Setting: capability.SettingDeliveryLimit, Stated: "5 deliveries (delivery_limit in the URL)", Held: "20 deliveries", Fix: "drop delivery_limit from the URL"}}}}
	st := guarantee.Explain(guarantee.Pipeline{Subscription: &sub, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}})
	if st.OK() || len(st.Findings) != 1 || st.Findings[0].Fix != "drop delivery_limit from the URL" ||
		!strings.Contains(st.Findings[0].Problem, "stated as 5 deliveries (delivery_limit in the URL), but the broker holds 20 deliveries") {
		t.Fatalf("findings: %+v", st.Findings)
	}
	tr := st.Lines[1]
	if tr.Verdict != guarantee.VerdictWeak || !strings.Contains(tr.Text, "dead-letters after 20 deliveries") || !strings.Contains(tr.Text, "subscription read from quorum queue q through the management API") {
		t.Fatalf("transport line: %+v", tr)
	}
}

// TestSourceOrderUnread: an order the driver could not read (a RabbitMQ
// queue read over AMQP, which cannot show x-single-active-consumer) is
// stated as unknown, whatever the Ordering field holds: never as "order
// per queue", and the order line does not count on it.
func TestSourceOrderUnread(t *testing.T) {
	sub := capability.Subscription{Ordering: capability.OrderQueue, DeliveryLimit: 20, DeliveryLimitMode: capability.LimitNative, DeadLetter: true,
		RedeliveryHorizon: capability.HorizonUnbounded,
		Source: capability.Source{Read: "quorum queue q over AMQP",
			Unread: []capability.Unread{{Setting: capability.SettingOrdering, Why: "x-single-active-consumer cannot be read over AMQP", Fix: "enable rabbitmq_management"}}}}
	for _, versioned := range []bool{false, true} {
		st := guarantee.Explain(guarantee.Pipeline{Subscription: &sub, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c", Versioned: versioned}, NeedOrder: true})
		s := st.String()
		if !st.OK() || !strings.Contains(s, "order unknown") || strings.Contains(s, "order per") || strings.Contains(s, "orders per") ||
			!strings.Contains(s, "UNKNOWN (transport): the subscription's ordering could not be read from the broker: x-single-active-consumer cannot be read over AMQP\n  to read it: enable rabbitmq_management") {
			t.Errorf("versioned %t: statement:\n%s", versioned, s)
		}
		if o := st.Lines[2]; o.Stage != "order" || o.Verdict != guarantee.VerdictWeak || !strings.Contains(o.Text, "could not be read") {
			t.Errorf("versioned %t: order line %+v", versioned, o)
		}
	}
}
