package guarantee_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/guarantee"
)

// TestOrderOneModel (issue 44): the order verdict counts what the consumer
// side adds, the same way for every broker. Four handlers without PerKey
// on a queue that orders are no worse than a queue without order, with
// the same inbox: version checks that hold gaps restore the order (ok),
// version checks that retry gaps through the broker park until the
// missing event is replayed (weak), and without them both are broken.
func TestOrderOneModel(t *testing.T) {
	sac := capability.Subscription{Ordering: capability.OrderQueue, DeliveryLimit: 5, DeadLetter: true}
	none := sac
	none.Ordering = capability.OrderNone
	for _, c := range []struct {
		name    string
		sub     capability.Subscription
		conc    int
		inbox   *guarantee.Inbox
		want    guarantee.Verdict
		finding string
	}{
		{"ordered queue, 4 without PerKey, versions held", sac, 4, &guarantee.Inbox{Consumer: "c", Versioned: true, HoldsGaps: true}, guarantee.VerdictOK, ""},
		{"no order, versions held", none, 1, &guarantee.Inbox{Consumer: "c", Versioned: true, HoldsGaps: true}, guarantee.VerdictOK, ""},
		{"ordered queue, 4 without PerKey, versions retried", sac, 4, &guarantee.Inbox{Consumer: "c", Versioned: true}, guarantee.VerdictWeak, ""},
		{"no order, versions retried", none, 1, &guarantee.Inbox{Consumer: "c", Versioned: true}, guarantee.VerdictWeak, ""},
		{"ordered queue, 4 without PerKey, no versions", sac, 4, &guarantee.Inbox{Consumer: "c"}, guarantee.VerdictBroken, "4 concurrent handlers without PerKey"},
		{"no order, no versions", none, 1, &guarantee.Inbox{Consumer: "c"}, guarantee.VerdictBroken, "no ordering scope"},
		{"no order, no inbox", none, 1, nil, guarantee.VerdictBroken, "no ordering scope"},
		{"ordered queue, one handler, no inbox", sac, 1, nil, guarantee.VerdictOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := c.sub
			st := guarantee.Explain(guarantee.Pipeline{Subscription: &sub, NeedOrder: true, Concurrency: c.conc, Outbox: &guarantee.Outbox{}, Inbox: c.inbox})
			l := st.Lines[2]
			if l.Stage != "order" || l.Verdict != c.want {
				t.Fatalf("order line %+v, want %s:\n%s", l, c.want, st)
			}
			var order []string
			for _, f := range st.Findings {
				if f.Stage == "order" {
					order = append(order, f.Problem)
				}
			}
			switch {
			case c.finding == "" && len(order) > 0:
				t.Errorf("order findings %q, want none", order)
			case c.finding != "" && (len(order) != 1 || !strings.Contains(order[0], c.finding)):
				t.Errorf("order findings %q, want one with %q", order, c.finding)
			}
		})
	}
}

// TestOrderSameEverywhere: over every order scope, head-of-line blocking
// or not, read or not, concurrency, PerKey, and the inbox (none, no
// versions, versions retried, versions held), the verdict depends only on
// whether the handlers see the broker's order and on what the inbox adds;
// a broken verdict always comes with a finding, and only then.
func TestOrderSameEverywhere(t *testing.T) {
	inboxes := map[string]*guarantee.Inbox{
		"no inbox":         nil,
		"inbox":            {Consumer: "c"},
		"versions retried": {Consumer: "c", Versioned: true},
		"versions held":    {Consumer: "c", Versioned: true, HoldsGaps: true},
	}
	for _, scope := range []capability.OrderingScope{capability.OrderNone, capability.OrderQueue, capability.OrderPartition, capability.OrderMessageGroup, capability.OrderSession} {
		for _, hol := range []bool{false, true} {
			for _, unread := range []bool{false, true} {
				for _, conc := range []int{1, 4} {
					for _, perKey := range []bool{false, true} {
						for in, inbox := range inboxes {
							sub := capability.Subscription{Ordering: scope, HeadOfLine: hol, DeliveryLimit: 5, DeadLetter: true}
							if unread {
								sub.Source.Unread = []capability.Unread{{Setting: capability.SettingOrdering, Why: "w", Fix: "f"}}
							}
							name := fmt.Sprintf("%s hol=%t unread=%t conc=%d perkey=%t %s", scope, hol, unread, conc, perKey, in)
							st := guarantee.Explain(guarantee.Pipeline{Subscription: &sub, NeedOrder: true, Concurrency: conc, PerKey: perKey, Outbox: &guarantee.Outbox{}, Inbox: inbox})
							reordered := conc > 1 && !perKey && !hol
							var want guarantee.Verdict
							switch {
							case !unread && scope != capability.OrderNone && !reordered:
								want = guarantee.VerdictOK
							case inbox != nil && inbox.Versioned && inbox.HoldsGaps:
								want = guarantee.VerdictOK
							case inbox != nil && inbox.Versioned:
								want = guarantee.VerdictWeak
							case unread && !reordered:
								want = guarantee.VerdictWeak
							default:
								want = guarantee.VerdictBroken
							}
							l := st.Lines[2]
							found := false
							for _, f := range st.Findings {
								found = found || f.Stage == "order"
							}
							if l.Verdict != want || found != (want == guarantee.VerdictBroken) {
								t.Errorf("%s: order %s (finding %t), want %s:\n%s", name, l.Verdict, found, want, l.Text)
							}
						}
					}
				}
			}
		}
	}
}
