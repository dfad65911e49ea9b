package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/idem"
)

// TestJSONEveryDataCommand: every command that prints data prints one JSON
// document on stdout with --json, and nothing else, whatever its exit code
// (parked show, which needs a parked row, in TestParkedReplayInVersionOrder).
func TestJSONEveryDataCommand(t *testing.T) {
	p := sqlitePipe(t)
	w := newWary(t)
	dlq := p.topicURL + "/billing"
	for _, c := range []struct {
		code int
		args []string
	}{
		{cli.ExitOK, p.args("explain", "--broker", p.topicURL, "--subscription", p.topicURL+"/billing", "--consumer", "billing")},
		{cli.ExitFinding, []string{"explain", "--broker", p.topicURL, "--subscription", p.topicURL + "/billing", "--inbox=false"}}, // a dual write
		{cli.ExitOK, []string{"probe", "mem://scratch", "--only", "round-trip-fidelity"}},
		{cli.ExitOK, p.args("parked", "list")},
		{cli.ExitOK, p.args("parked", "early")},
		{cli.ExitOK, p.args("parked", "replay", "--consumer", "billing", "--all", "--to", p.topicURL, "--yes")},
		{cli.ExitOK, p.args("parked", "discard", "--consumer", "billing", "--all", "--yes")},
		{cli.ExitOK, p.args("outbox", "status")},
		{cli.ExitOK, p.args("outbox", "list")},
		{cli.ExitFinding, p.args("outbox", "requeue", "1", "--yes")}, // no such row: skipped
		{cli.ExitFinding, p.args("outbox", "discard", "1", "--yes")},
		{cli.ExitOK, []string{"dlq", "list", dlq, "--wait", "100ms"}},
		{cli.ExitOK, []string{"dlq", "replay", dlq, "--all", "--to", p.topicURL, "--yes", "--wait", "100ms"}},
		{cli.ExitOK, []string{"dlq", "discard", dlq, "--all", "--yes", "--wait", "100ms"}},
	} {
		r := w.want(c.code, append(c.args, "--json")...)
		if !json.Valid([]byte(r.out)) || !strings.HasPrefix(strings.TrimSpace(r.out), "{") && !strings.HasPrefix(strings.TrimSpace(r.out), "[") {
			t.Errorf("wary %s --json: stdout is not one JSON document:\n%s", strings.Join(c.args, " "), r.out)
		}
	}
}

// TestParkedReplayInVersionOrder: an aggregate's parked messages go back
// to the broker in version order, not in the order they were parked. The
// topic is partitioned (one key, one partition), so the consumer receives
// them in the order replay published them.
func TestParkedReplayInVersionOrder(t *testing.T) {
	ctx := t.Context()
	p := sqlitePipeQuery(t, "?profile=partitioned")
	in, err := p.store.newInbox("billing", p.sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	park := func(context.Context, *sql.Tx, *broker.Delivery) error {
		return &idem.ParkError{Reason: "parked by the test", Now: true}
	}
	// Version 2 arrives first and is parked; 1 and 3 are held behind it.
	for _, v := range []int64{2, 1, 3} {
		id := "order-1/v" + strconv.FormatInt(v, 10)
		publish(t, p.topic, event(id, "order-1", v))
		d := receive(t, p.sub, 1)[0]
		r, err := in.Handle(ctx, d, park)
		var pe *idem.ParkError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("handle %s: %v", id, err)
		}
		if r != idem.ResultParked && r != idem.ResultHeld {
			t.Fatalf("%s: %v, want parked or held", id, r)
		}
	}
	w := newWary(t)
	var show struct {
		MessageID string            `json:"message_id"`
		Headers   map[string]string `json:"headers"`
	}
	w.want(cli.ExitOK, p.args("parked", "show", "1", "--consumer", "billing", "--json")...).json(t, &show)
	if show.MessageID != "order-1/v2" || show.Headers["traceparent"] != "00-order-1/v2" {
		t.Fatalf("parked show 1 --json: %+v, want order-1/v2 (parked first) with its headers", show)
	}
	var res struct {
		Replayed []struct {
			MessageID string `json:"message_id"`
		} `json:"replayed"`
	}
	w.want(cli.ExitOK, p.args("parked", "replay", "--consumer", "billing", "--aggregate", "order-1", "--to", p.topicURL, "--yes", "--json")...).json(t, &res)
	want := []string{"order-1/v1", "order-1/v2", "order-1/v3"}
	var got []string
	for _, r := range res.Replayed {
		got = append(got, r.MessageID)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("replay --json lists %v, want %v", got, want)
	}
	got = got[:0]
	for _, d := range receive(t, p.sub, 3) {
		got = append(got, d.Message.ID)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the consumer received %v, want %v (version order)", got, want)
	}
}

// TestDestructiveCommandsAsk: outbox discard, parked discard and dlq
// discard ask first; an answer other than yes changes nothing.
func TestDestructiveCommandsAsk(t *testing.T) {
	ctx := t.Context()
	p := sqlitePipe(t)
	addRow(t, p.store, "order-5")
	in, err := p.store.newInbox("billing", p.sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, p.topic, event("order-6/placed", "order-6", 1))
	if r, _ := in.Handle(ctx, receive(t, p.sub, 1)[0], func(context.Context, *sql.Tx, *broker.Delivery) error {
		return &idem.ParkError{Reason: "parked by the test", Now: true}
	}); r != idem.ResultParked {
		t.Fatalf("handle: %v, want parked", r)
	}
	publish(t, p.topic, event("order-7/placed", "order-7", 1))
	if err := receive(t, p.sub, 1)[0].DeadLetter(ctx, "poison"); err != nil {
		t.Fatal(err)
	}
	dlq := p.topicURL + "/billing"

	w := newWary(t)
	w.stdin = "n\n"
	for _, args := range [][]string{
		p.args("outbox", "discard", "1"),
		p.args("parked", "discard", "--consumer", "billing", "--all"),
		{"dlq", "discard", dlq, "--all", "--wait", "1s"},
	} {
		if r := w.want(cli.ExitDeclined, args...); !strings.Contains(r.errout, "[y/N]") || !strings.Contains(r.errout, "nothing was changed") {
			t.Errorf("wary %s: stderr %q does not ask, or does not say it did nothing", strings.Join(args, " "), r.errout)
		}
	}
	w.want(cli.ExitOK, p.args("outbox", "list", "--state", "pending")...).has(t, "order-5")
	w.want(cli.ExitFinding, p.args("parked", "list")...).has(t, "order-6/placed")
	w.want(cli.ExitFinding, "dlq", "list", dlq, "--wait", "1s").has(t, "order-7/placed")
}
