package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wary-go/wary/conformance"
)

// run runs the example with cfg and checks its report.
func run(t *testing.T, cfg Config) { runDedup(t, cfg, false) }

// runDedup is run on a broker that drops copies of a message ID inside its
// deduplication window (SQS FIFO): the relay's and the broker's copies
// never reach the inbox.
func runDedup(t *testing.T, cfg Config, brokerDedups bool) {
	t.Helper()
	var out bytes.Buffer
	rep, err := Run(t.Context(), &out, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("report not OK: %+v", rep)
	}
	h := rep.History
	if rep.Published != 2*orders || h.Sent != 2*orders || h.Delivered != 2*orders || h.Applied != 2*orders || rep.Effects != 2*orders {
		t.Errorf("published %d, history %s, %d effects: want %d of each", rep.Published, h, rep.Effects, 2*orders)
	}
	// The relay's crash republished crashAt events and the broker
	// duplicated one: each is delivered again and dropped by the inbox.
	if copies := rep.Publishes - rep.Published; copies != crashAt+1 {
		t.Errorf("%d copies reached the broker, want %d", copies, crashAt+1)
	}
	if brokerDedups {
		if rep.Inbox.Duplicates != 0 {
			t.Errorf("inbox dropped %d duplicates: want none, the broker drops copies inside its window", rep.Inbox.Duplicates)
		}
	} else if rep.Inbox.Duplicates != crashAt+1 || len(h.DuplicateDeliveries) < crashAt+1 {
		t.Errorf("inbox dropped %d duplicates, history shows %d events delivered twice: want %d", rep.Inbox.Duplicates, len(h.DuplicateDeliveries), crashAt+1)
	}
	// The reordered event was a gap retried until its predecessor came;
	// the redelivered one left a gap open: parked, with the event behind
	// it held, and replayed.
	if rep.Redeliveries == 0 || rep.Inbox.Retried == 0 || rep.Inbox.Parked < 2 || rep.Inbox.Held < 1 || rep.Inbox.Replayed != rep.Inbox.Parked || rep.StillParked != 0 {
		t.Errorf("redeliveries %d, inbox %+v, still parked %d: want retries, at least 2 parked (1 held; a broker that redelivers late, as Service Bus's scheduled copies under load, parks more), all replayed, none left", rep.Redeliveries, rep.Inbox, rep.StillParked)
	}
	if rep.ProviderCalls != orders+1 {
		t.Errorf("provider calls %d, want %d (one retry with the same key)", rep.ProviderCalls, orders+1)
	}
	for _, want := range []string{"relay crash yes, broker duplicate yes, reorder yes, redelivery yes, payment crash yes", "\nresult: OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestRun is the default run: SQLite and the in-memory broker.
func TestRun(t *testing.T) { run(t, Config{}) }

// TestRunServiceBusProfiles runs the example on the memory broker's
// imitations of a Service Bus session entity and of a topic subscription
// without sessions, which promise no delayed Nack, as the real ones.
func TestRunServiceBusProfiles(t *testing.T) {
	for _, tc := range []struct {
		url    string
		dedups bool // duplicate detection, 10 minutes by default
	}{{"mem://orders?profile=servicebus", true}, {"mem://orders?nackdelay=false", false}} {
		t.Run(tc.url, func(t *testing.T) { runDedup(t, Config{Broker: tc.url}, tc.dedups) })
	}
}

// TestReportOK: a lost event, an effect applied twice or a double charge
// fail the run.
func TestReportOK(t *testing.T) {
	good := func() Report {
		h := conformance.NewHistory()
		h.Sent("a")
		h.Delivered("a", "a")
		h.Applied("a")
		return Report{History: h.Check(), Orders: 1, Charges: map[string]int{"payment:a:1": 1},
			Faults: Faults{RelayCrash: true, BrokerDuplicate: true, Reorder: true, Redelivery: true, PaymentCrash: true}}
	}
	if r := good(); !r.OK() {
		t.Fatalf("good report not OK: %+v", r)
	}
	bad := map[string]func(r *Report){
		"lost": func(r *Report) {
			h := conformance.NewHistory()
			h.Sent("a", "b")
			h.Delivered("a")
			h.Applied("a")
			r.History = h.Check()
		},
		"applied twice": func(r *Report) {
			h := conformance.NewHistory()
			h.Sent("a")
			h.Delivered("a")
			h.Applied("a", "a")
			r.History = h.Check()
		},
		"charged twice":   func(r *Report) { r.Charges["payment:a:1"] = 2 },
		"not charged":     func(r *Report) { r.Charges = map[string]int{} },
		"still parked":    func(r *Report) { r.StillParked = 1 },
		"no relay crash":  func(r *Report) { r.Faults.RelayCrash = false },
		"no redelivery":   func(r *Report) { r.Faults.Redelivery = false },
		"no duplicate":    func(r *Report) { r.Faults.BrokerDuplicate = false },
		"no reorder":      func(r *Report) { r.Faults.Reorder = false },
		"no payment fail": func(r *Report) { r.Faults.PaymentCrash = false },
	}
	for name, f := range bad {
		r := good()
		f(&r)
		if r.OK() {
			t.Errorf("%s: report OK", name)
		}
		var out bytes.Buffer
		writeReport(&out, &r)
		if !strings.Contains(out.String(), "result: FAILED") {
			t.Errorf("%s: report does not say FAILED:\n%s", name, out.String())
		}
	}
}
