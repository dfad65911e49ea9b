package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

// ExampleExplain states the guarantee of a pipeline on an SQS FIFO queue:
// an outbox, an inbox with version checks, and four handlers.
func Example_explain() {
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO, DeliveryLimit: 5, Retention: 96 * time.Hour})
	_ = b.CreateSubscription("orders", "billing")
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	defer sub.Close()
	st := idem.Explain(idem.Pipeline{Caps: sub.Capabilities(), Outbox: true, Inbox: true, Consumer: "billing",
		Versioned: true, NeedOrder: true, Concurrency: 4})
	for _, l := range st.Lines {
		fmt.Printf("%s: %s\n", l.Stage, l.Verdict)
	}
	fmt.Println("misconfigurations:", len(st.Findings))
	// Output:
	// publication: ok
	// transport: ok
	// order: ok
	// consumption: ok
	// effects: ok
	// misconfigurations: 0
}

func TestExplainFindings(t *testing.T) {
	partitioned := broker.Capabilities{Ordering: broker.OrderPartition, OrderingKey: "key", RedeliveryHorizon: 72 * time.Hour}
	for _, c := range []struct {
		name string
		p    idem.Pipeline
		want []string // the findings' stages, in order
	}{
		{"sound", idem.Pipeline{Caps: withLimit(partitioned), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true, Concurrency: 4, PerKey: true}, nil},
		{"direct publish, no inbox", idem.Pipeline{Caps: withLimit(partitioned)}, []string{"publication", "consumption"}},
		{"no delivery limit", idem.Pipeline{Caps: partitioned, Outbox: true, Inbox: true, Consumer: "c"}, []string{"transport"}},
		{"concurrent without PerKey", idem.Pipeline{Caps: withLimit(partitioned), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true, Concurrency: 2}, []string{"order"}},
		{"head-of-line needs no PerKey", idem.Pipeline{Caps: hol(withLimit(partitioned)), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true, Concurrency: 2}, nil},
		{"order on an unordered broker", idem.Pipeline{Caps: unordered(withLimit(partitioned)), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true}, []string{"order"}},
		{"version checks make up for it", idem.Pipeline{Caps: unordered(withLimit(partitioned)), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true, Versioned: true}, nil},
		{"short retention", idem.Pipeline{Caps: withLimit(partitioned), Outbox: true, Inbox: true, Consumer: "c",
			InboxOptions: &idem.Options{Retention: time.Hour, AllowShortRetention: true}}, []string{"consumption"}},
		{"unknown horizon, no retention", idem.Pipeline{Caps: broker.Capabilities{DeliveryLimit: 3}, Outbox: true, Inbox: true, Consumer: "c"}, []string{"consumption"}},
		{"dedup window shorter than the relay's span", idem.Pipeline{Caps: dedup(withLimit(partitioned), time.Minute), Outbox: true}, []string{"transport", "consumption"}},
		{"gap retries beyond the delivery limit", idem.Pipeline{Caps: unordered(withLimit(partitioned)), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true, Versioned: true,
			InboxOptions: &idem.Options{MaxAttempts: 6}}, []string{"consumption"}},
		{"gap retries within the delivery limit", idem.Pipeline{Caps: unordered(withLimit(partitioned)), Outbox: true, Inbox: true, Consumer: "c", NeedOrder: true, Versioned: true,
			InboxOptions: &idem.Options{MaxAttempts: 5}}, nil},
		{"unkeyed external calls", idem.Pipeline{Caps: withLimit(partitioned), Outbox: true, Inbox: true, Consumer: "c", UnkeyedCalls: true}, []string{"effects"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := idem.Explain(c.p)
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

func withLimit(c broker.Capabilities) broker.Capabilities {
	c.DeliveryLimit, c.DeliveryLimitMode, c.DeadLetter = 5, broker.LimitNative, true
	return c
}
func hol(c broker.Capabilities) broker.Capabilities { c.HeadOfLine = true; return c }
func unordered(c broker.Capabilities) broker.Capabilities {
	c.Ordering, c.OrderingKey = broker.OrderNone, ""
	return c
}
func dedup(c broker.Capabilities, w time.Duration) broker.Capabilities {
	c.DedupWindow, c.DedupScope = w, broker.DedupQueue
	return c
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
	noLimit := broker.Capabilities{RedeliveryHorizon: time.Hour}
	in, err := idem.NewInbox(st, "billing", noLimit, &idem.Options{Logger: logger})
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
	out := buf.String()
	if strings.Count(out, "idem: inbox started") != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, "guarantee.consumption=") || !strings.Contains(out, "no delivery limit") {
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
	relay, err := idem.NewRelay(st, top, &idem.RelayOptions{Logger: logger, PollInterval: time.Hour})
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
}

// RetrySpan is computed at once for a relay that retries (almost) for
// ever, and saturates instead of overflowing.
func TestRetrySpanHugeMaxAttempts(t *testing.T) {
	o := &idem.RelayOptions{MaxAttempts: math.MaxInt32, PublishTimeout: 10 * time.Second, Backoff: broker.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}}
	if got := idem.RetrySpan(o); got != math.MaxInt64 {
		t.Errorf("RetrySpan = %v, want the largest Duration", got)
	}
	o = &idem.RelayOptions{MaxAttempts: 4, PublishTimeout: time.Second, Backoff: broker.Backoff{Initial: time.Second, Max: 2 * time.Second}}
	if got, want := idem.RetrySpan(o), 4*time.Second+time.Second+2*time.Second+2*time.Second; got != want {
		t.Errorf("RetrySpan = %v, want %v", got, want)
	}
}

// TestStatementFromBuiltObjects: an inbox's statement says what the
// program built, without the caller describing it: building a version-
// checking handler turns version checks on in the statement and in the
// start-up log.
func TestStatementFromBuiltObjects(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	caps := broker.Capabilities{RedeliveryHorizon: time.Hour, DeliveryLimit: 10, DeadLetter: true}
	consumption := func(s idem.Statement) string {
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
	plain, err := idem.NewInbox(st, "plain", caps, &idem.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if c := consumption(plain.Statement()); !strings.Contains(c, "no version checks") {
		t.Errorf("inbox without version checks: %q", c)
	}
	versioned, err := idem.NewInbox(st, "versioned", caps, &idem.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h, err := versioned.Versioned(idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"}, func(context.Context, *sql.Tx, *broker.Delivery, idem.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if c := consumption(versioned.Statement()); strings.Contains(c, "no version checks") || !strings.Contains(c, "version checks ack duplicates") {
		t.Errorf("inbox with a versioned handler: %q", c)
	}
	_, _ = versioned.Handle(ctx, broker.NewDetachedDelivery(&broker.Message{ID: "x"}, 1), h)
	if out := buf.String(); !strings.Contains(out, "version checks ack duplicates") || strings.Contains(out, "no version checks") {
		t.Errorf("the versioned inbox's start-up log does not say what it does:\n%s", out)
	}
}
