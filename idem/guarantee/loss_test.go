package guarantee_test

import (
	"strings"
	"testing"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/guarantee"
)

// TestDeliveryLimitThatDrops: a delivery limit without a dead-letter
// target loses what passes it (RabbitMQ deletes a message past
// x-delivery-limit on a queue without a dead-letter exchange), so it is a
// transport finding with its fix and the transport is broken, whatever the
// consumer adds; with a dead-letter target it is none, and where the
// target could not be read it is unknown, not a finding.
func TestDeliveryLimitThatDrops(t *testing.T) {
	base := capability.Subscription{Ordering: capability.OrderQueue, DeliveryLimit: 5, DeliveryLimitMode: capability.LimitNative, RedeliveryHorizon: capability.HorizonUnbounded}
	unreadDLX := base
	unreadDLX.Source.Unread = []capability.Unread{{Setting: capability.SettingDeadLetter, Why: "w", Fix: "f"}}
	dead := base
	dead.DeadLetter = true
	for _, c := range []struct {
		name  string
		sub   capability.Subscription
		want  guarantee.Verdict
		finds bool
		text  string
	}{
		{"no dead-letter target", base, guarantee.VerdictBroken, true, "drops after 5 deliveries (native)"},
		{"dead-letter target unread", unreadDLX, guarantee.VerdictWeak, false, "ends a message after 5 deliveries (native; dead-letter target unknown)"},
		{"dead-letter target", dead, guarantee.VerdictOK, false, "dead-letters after 5 deliveries (native)"},
	} {
		for _, inbox := range []*guarantee.Inbox{nil, {Consumer: "c"}, {Consumer: "c", Versioned: true, HoldsGaps: true}} {
			sub := c.sub
			st := guarantee.Explain(guarantee.Pipeline{Subscription: &sub, Outbox: &guarantee.Outbox{}, Inbox: inbox})
			tr := st.Lines[1]
			if tr.Stage != "transport" || tr.Verdict != c.want || !strings.Contains(tr.Text, c.text) {
				t.Errorf("%s, inbox %+v: transport %+v, want %s with %q", c.name, inbox, tr, c.want, c.text)
			}
			var drops []guarantee.Finding
			for _, f := range st.Findings {
				if f.Stage == "transport" {
					drops = append(drops, f)
				}
			}
			switch {
			case !c.finds && len(drops) > 0:
				t.Errorf("%s: transport findings %+v, want none", c.name, drops)
			case c.finds && (len(drops) != 1 || !strings.Contains(drops[0].Problem, "drops a message after 5 deliveries") ||
				!strings.Contains(drops[0].Fix, "dead-letter-exchange policy or x-dead-letter-exchange")):
				t.Errorf("%s: transport findings %+v, want the drop with its fix", c.name, drops)
			}
			if c.finds && !strings.Contains(st.String(), "MISCONFIGURED (transport): the subscription drops a message after 5 deliveries: it has no dead-letter target") {
				t.Errorf("%s: statement:\n%s", c.name, st)
			}
		}
	}
}
