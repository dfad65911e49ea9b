package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
)

func TestExplainFindings(t *testing.T) {
	partitioned := capability.Subscription{Ordering: capability.OrderPartition, RedeliveryHorizon: 72 * time.Hour}
	keyed := &capability.Topic{OrderingKey: "key"}
	for _, c := range []struct {
		name string
		p    guarantee.Pipeline
		want []string // the findings' stages, in order
	}{
		{"sound", guarantee.Pipeline{Topic: keyed, Subscription: withLimit(partitioned), NeedOrder: true, Concurrency: 4, PerKey: true, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, nil},
		{"direct publish, no inbox", guarantee.Pipeline{Subscription: withLimit(partitioned)}, []string{"publication", "consumption"}},
		{"no delivery limit", guarantee.Pipeline{Subscription: &partitioned, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, []string{"transport"}},
		{"concurrent without PerKey", guarantee.Pipeline{Subscription: withLimit(partitioned), NeedOrder: true, Concurrency: 2, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, []string{"order"}},
		{"head-of-line needs no PerKey", guarantee.Pipeline{Subscription: hol(withLimit(partitioned)), NeedOrder: true, Concurrency: 2, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, nil},
		{"order on an unordered broker", guarantee.Pipeline{Subscription: unordered(withLimit(partitioned)), NeedOrder: true, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, []string{"order"}},
		{"version checks make up for it", guarantee.Pipeline{Subscription: unordered(withLimit(partitioned)), NeedOrder: true, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c", Versioned: true}}, nil},
		{"short retention", guarantee.Pipeline{Subscription: withLimit(partitioned), Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c", Retention: time.Hour}}, []string{"consumption"}},
		{"unknown horizon, no retention", guarantee.Pipeline{Subscription: &capability.Subscription{DeliveryLimit: 3, DeadLetter: true}, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, []string{"consumption"}},
		{"a delivery limit that drops", guarantee.Pipeline{Subscription: &capability.Subscription{Ordering: capability.OrderPartition, DeliveryLimit: 3, RedeliveryHorizon: 72 * time.Hour}, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, []string{"transport"}},
		{"dedup window shorter than the relay's span", guarantee.Pipeline{Topic: dedup(time.Minute), Subscription: withLimit(partitioned), Outbox: &guarantee.Outbox{}}, []string{"transport", "consumption"}},
		{"gap retries beyond the delivery limit", guarantee.Pipeline{Subscription: unordered(withLimit(partitioned)), NeedOrder: true, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c", MaxAttempts: 6, Versioned: true}}, []string{"consumption"}},
		{"gap retries within the delivery limit", guarantee.Pipeline{Subscription: unordered(withLimit(partitioned)), NeedOrder: true, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c", MaxAttempts: 5, Versioned: true}}, nil},
		{"the publish half alone finds nothing in delivery", guarantee.Pipeline{Topic: keyed, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, nil},
		{"unkeyed external calls", guarantee.Pipeline{Subscription: withLimit(partitioned), UnkeyedCalls: true, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "c"}}, []string{"effects"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := guarantee.Explain(c.p)
			if len(st.Lines) != 5 {
				t.Fatalf("%d lines, want 5:\n%s", len(st.Lines), st)
			}
			var got []string
			for _, f := range st.Findings {
				got = append(got, f.Stage)
				if f.Fix == "" {
					t.Errorf("finding without a fix: %+v", f)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("findings %v, want %v:\n%s", got, c.want, st)
			}
			if st.OK() != (len(c.want) == 0) {
				t.Errorf("OK() = %t with findings %v", st.OK(), got)
			}
			b, err := json.Marshal(st)
			if err != nil || !bytes.Contains(b, []byte(`"findings":[`)) {
				t.Errorf("JSON %s, %v", b, err)
			}
		})
	}
}

func withLimit(c capability.Subscription) *capability.Subscription {
	c.DeliveryLimit, c.DeliveryLimitMode, c.DeadLetter = 5, capability.LimitNative, true
	return &c
}
func hol(c *capability.Subscription) *capability.Subscription {
	h := *c
	h.HeadOfLine = true
	return &h
}
func unordered(c *capability.Subscription) *capability.Subscription {
	u := *c
	u.Ordering = capability.OrderNone
	return &u
}
func dedup(w time.Duration) *capability.Topic {
	return &capability.Topic{DedupWindow: w, DedupScope: capability.DedupQueue}
}

// TestInboxAndRelayLogTheirGuarantee: an inbox, when it first handles a
// delivery, and Relay.Run log the statement of their side once; a
// misconfiguration makes it a warning.
func TestInboxAndRelayLogTheirGuarantee(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	noLimit := capability.Subscription{RedeliveryHorizon: time.Hour}
	in, err := idem.NewInbox(st, "billing", noLimit, &idem.Options{Telemetry: broker.Telemetry{Logger: logger}})
	if err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("NewInbox logged before its handlers were built:\n%s", buf.String())
	}
	nop := func(context.Context, *sql.Tx, *broker.Delivery) error { return nil }
	for _, id := range []string{"m1", "m2"} {
		if _, err := in.Handle(ctx, broker.NewDetachedDelivery(&broker.Message{ID: id}, 1), nop); err != nil {
			t.Fatal(err)
		}
	}
	// One line, a warning that names the finding and where its fix is.
	out := buf.String()
	if strings.Count(out, "started: each message ID applied once") != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, "consumer=billing") || !strings.Contains(out, "no delivery limit") || !strings.Contains(out, "Inbox.Statement") {
		t.Fatalf("inbox start-up log:\n%s", out)
	}
	buf.Reset()
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO, DeliveryLimit: 3})
	top, err := b.OpenTopic("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(st, top, &outbox.RelayOptions{Telemetry: broker.Telemetry{Logger: logger}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	cancel() // Run logs, finds nothing to do, and returns
	_ = relay.Run(rctx)
	out = buf.String()
	if strings.Count(out, "idem: relay started") != 1 || !strings.Contains(out, "level=INFO") || !strings.Contains(out, "guarantee.publication=") {
		t.Fatalf("relay start-up log:\n%s", out)
	}
	// The relay states its topic's half (the key, the dedup window), not
	// the consumers' delivery limit, which its topic no longer declares.
	if !strings.Contains(out, "keyed by MessageGroupId") || strings.Contains(out, "deliveries") || !strings.Contains(out, "delivery not stated here") {
		t.Fatalf("the relay's transport line states the subscription's half:\n%s", out)
	}
}

// RetrySpan is computed at once for a relay that retries (almost) for
// ever, and saturates instead of overflowing.
func TestRetrySpanHugeMaxAttempts(t *testing.T) {
	o := &guarantee.Outbox{MaxAttempts: math.MaxInt32, PublishTimeout: 10 * time.Second, Backoff: broker.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}}
	if got := o.RetrySpan(); got != math.MaxInt64 {
		t.Errorf("RetrySpan = %v, want the largest Duration", got)
	}
	o = &guarantee.Outbox{MaxAttempts: 4, PublishTimeout: time.Second, Backoff: broker.Backoff{Initial: time.Second, Max: 2 * time.Second}}
	if got, want := o.RetrySpan(), 4*time.Second+time.Second+2*time.Second+2*time.Second; got != want {
		t.Errorf("RetrySpan = %v, want %v", got, want)
	}
}

// TestStatementFromBuiltObjects: an inbox's statement says what the
// program built, without the caller describing it: an inbox built with
// Options.Versions has version checks on in the statement and in the
// start-up log.
func TestStatementFromBuiltObjects(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	caps := capability.Subscription{RedeliveryHorizon: time.Hour, DeliveryLimit: 10, DeadLetter: true}
	consumption := func(s guarantee.Statement) string {
		for _, l := range s.Lines {
			if l.Stage == "consumption" {
				return l.Text
			}
		}
		t.Fatalf("no consumption line in %v", s)
		return ""
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	plain, err := idem.NewInbox(st, "plain", caps, &idem.Options{Telemetry: broker.Telemetry{Logger: logger}})
	if err != nil {
		t.Fatal(err)
	}
	if c := consumption(plain.Statement()); !strings.Contains(c, "no version checks") {
		t.Errorf("inbox without version checks: %q", c)
	}
	versioned, err := idem.NewInbox(st, "versioned", caps, &idem.Options{Telemetry: broker.Telemetry{Logger: logger},
		Versions: idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := consumption(versioned.Statement()); strings.Contains(c, "no version checks") || !strings.Contains(c, "version checks ack duplicates") {
		t.Errorf("inbox with version checks: %q", c)
	}
	// Each inbox logs one start-up line, on its first delivery: the
	// versioned one's names its version checks, the plain one's none.
	h := func(context.Context, *sql.Tx, *broker.Delivery) error { return nil }
	for _, in := range []*idem.Inbox[*sql.Tx]{plain, versioned} {
		_, _ = in.Handle(ctx, broker.NewDetachedDelivery(&broker.Message{ID: "x"}, 1), h)
	}
	started := 0
	for line := range strings.Lines(buf.String()) {
		if !strings.Contains(line, "started") {
			continue
		}
		started++
		isVersioned := strings.Contains(line, "consumer=versioned")
		if says := strings.Contains(line, "versions checked in accounts"); says != isVersioned {
			t.Errorf("start-up log line does not say what the inbox does (version checks: %v):\n%s", isVersioned, line)
		}
	}
	if started != 2 {
		t.Errorf("%d start-up log lines, want 2:\n%s", started, buf.String())
	}
}
