package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
)

// wary runs the command tree in process with env as its whole
// environment and stdin as its input.
type wary struct {
	t         *testing.T
	env       map[string]string
	stdin     string
	harnesses map[string]cli.HarnessFunc
}

type result struct {
	code        int
	out, errout string
}

func newWary(t *testing.T) *wary { return &wary{t: t, env: map[string]string{}} }

func (w *wary) run(args ...string) result {
	w.t.Helper()
	var out, errout bytes.Buffer
	ctx, cancel := context.WithTimeout(w.t.Context(), 2*time.Minute)
	defer cancel()
	code := cli.Run(ctx, args, cli.IO{In: strings.NewReader(w.stdin), Out: &out, Err: &errout, Getenv: func(k string) string { return w.env[k] }, Harnesses: w.harnesses})
	return result{code, out.String(), errout.String()}
}

// want runs args and fails unless the exit code is code.
func (w *wary) want(code int, args ...string) result {
	w.t.Helper()
	r := w.run(args...)
	if r.code != code {
		w.t.Fatalf("wary %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.out, r.errout)
	}
	return r
}

func (r result) has(t *testing.T, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.out, p) {
			t.Errorf("stdout lacks %q:\n%s", p, r.out)
		}
	}
}

// hasErr fails unless stderr has every part.
func (r result) hasErr(t *testing.T, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.errout, p) {
			t.Errorf("stderr lacks %q:\n%s", p, r.errout)
		}
	}
}

func (r result) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.out), v); err != nil {
		t.Fatalf("stdout is not the JSON wanted (%v):\n%s", err, r.out)
	}
}

var seq atomic.Int64

// unique returns a name no other test of this run uses.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
}

// TestHelpEveryCommand: every command has --help with an example.
func TestHelpEveryCommand(t *testing.T) {
	w := newWary(t)
	for _, cmd := range [][]string{{}, {"explain"}, {"probe"}, {"parked"}, {"parked", "list"}, {"parked", "show"}, {"parked", "replay"},
		{"parked", "discard"}, {"outbox"}, {"outbox", "status"}, {"outbox", "list"}, {"outbox", "requeue"}, {"outbox", "discard"},
		{"dlq"}, {"dlq", "list"}, {"dlq", "replay"}, {"dlq", "discard"}, {"topology"}, {"version"}} {
		r := w.want(cli.ExitOK, append(cmd, "--help")...)
		if !strings.Contains(r.out, "Examples:\n  wary ") {
			t.Errorf("wary %s --help has no example:\n%s", strings.Join(cmd, " "), r.out)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	w := newWary(t)
	for _, args := range [][]string{
		{"explain"},                        // --broker is required
		{"explain", "--broker", "mem://x"}, // so is --subscription
		{"explain", "--broker", "mem://x", "--subscription", "mem://x/s", "--no-such-flag"},
		{"no-such-command"},
		{"parked", "show", "notanumber", "--consumer", "c", "--sqlite", "x.db"},
		{"parked", "list"}, // no store named
		{"outbox", "list", "--state", "lost", "--sqlite", "x.db"},
		{"explain", "--broker", "nosuchscheme://x", "--subscription", "nosuchscheme://x", "--inbox=false"},
	} {
		r := w.want(cli.ExitError, args...)
		if !strings.HasPrefix(r.errout, "wary: ") {
			t.Errorf("wary %v: stderr %q does not say what went wrong", args, r.errout)
		}
	}
}

// TestPasswordsNeverPrinted: a connection error names the server, never
// its password.
func TestPasswordsNeverPrinted(t *testing.T) {
	w := newWary(t)
	for _, args := range [][]string{
		{"outbox", "status", "--postgres", "postgres://admin:s3cr3tpw@127.0.0.1:1/db?connect_timeout=1"},
		{"parked", "list", "--mysql", "root:s3cr3tpw@tcp(127.0.0.1:1)/test?timeout=1s"},
		{"console", "--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", "billing", "--addr", "127.0.0.1:0",
			"--mysql", "root:s3cr3tpw@tcp(127.0.0.1:1)/test?timeout=1s"},
		{"explain", "--broker", "amqp://guest:s3cr3tpw@127.0.0.1:1/?exchange=x", "--subscription", "amqp://guest:s3cr3tpw@127.0.0.1:1/?queue=x", "--inbox=false"},
	} {
		r := w.want(cli.ExitError, args...)
		if strings.Contains(r.out+r.errout, "s3cr3tpw") {
			t.Errorf("wary %v printed the password:\n%s%s", args, r.out, r.errout)
		}
		if !strings.Contains(r.errout, "xxxxx") {
			t.Errorf("wary %v: want the redacted URL in %q", args, r.errout)
		}
	}
	for _, pg := range []string{
		"postgres://admin:s3cr3tpw@127.0.0.1:1/db?connect_timeout=1",
		"host=127.0.0.1 port=1 user=postgres password=s3cr3tpw connect_timeout=1",
		"host=127.0.0.1 port=1 user=postgres password='s3cr3tpw and more' connect_timeout=1",
		"host=127.0.0.1 port=1 user=postgres sslpassword=s3cr3tpw connect_timeout=1",
	} {
		for _, args := range [][]string{{"parked", "list"}, {"outbox", "status", "--json"}, {"outbox", "status", "--postgres", pg}} {
			w.env[cli.EnvPostgres] = pg
			r := w.want(cli.ExitError, args...)
			if strings.Contains(r.out+r.errout, "s3cr3tpw") {
				t.Errorf("wary %v with %s=%q printed the password:\n%s%s", args, cli.EnvPostgres, pg, r.out, r.errout)
			}
			if !strings.Contains(r.errout, "127.0.0.1") {
				t.Errorf("wary %v: want the server named in %q", args, r.errout)
			}
		}
	}
	delete(w.env, cli.EnvPostgres)
	w.env[cli.EnvServiceBus] = "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=s3cr3tpw;UseDevelopmentEmulator=true"
	for _, args := range [][]string{
		{"explain", "--broker", "servicebus://orders", "--subscription", "servicebus://orders", "--inbox=false"},
		{"explain", "--broker", "servicebus://orders", "--subscription", "servicebus://orders", "--inbox=false", "--json"},
		{"dlq", "list", "--subscription", "servicebus://orders"},
	} {
		r := w.run(args...)
		if strings.Contains(r.out+r.errout, "s3cr3tpw") {
			t.Errorf("wary %v printed the shared access key:\n%s%s", args, r.out, r.errout)
		}
	}
}

// TestPasswordsInUnparsableURLsNeverPrinted: a URL that does not parse (a
// space or a quote in the password, no scheme) keeps its password out of
// every command's output and errors, from a flag or the environment
// (issue 43).
func TestPasswordsInUnparsableURLsNeverPrinted(t *testing.T) {
	w := newWary(t)
	for _, pg := range []string{
		"postgres://postgres:S3cr3tPW x@127.0.0.1:1/test",
		"postgres://postgres:'S3cr3tPW'@127.0.0.1:1/test",
		"://postgres:S3cr3tPW@127.0.0.1:1/test",
	} {
		for _, args := range [][]string{
			{"parked", "list", "--postgres", pg},
			{"parked", "list", "--postgres", pg, "--json"},
			{"outbox", "status", "--postgres", pg},
			{"parked", "replay", "--consumer", "c", "--all", "--to", "mem://x", "--postgres", pg, "--yes"},
		} {
			r := w.want(cli.ExitError, args...)
			if strings.Contains(r.out+r.errout, "S3cr3tPW") {
				t.Errorf("wary %q printed the password:\n%s%s", args, r.out, r.errout)
			}
		}
		w.env[cli.EnvPostgres] = pg
		for _, args := range [][]string{{"parked", "list"}, {"outbox", "status", "--json"}} {
			r := w.want(cli.ExitError, args...)
			if strings.Contains(r.out+r.errout, "S3cr3tPW") {
				t.Errorf("wary %q with %s=%q printed the password:\n%s%s", args, cli.EnvPostgres, pg, r.out, r.errout)
			}
		}
		delete(w.env, cli.EnvPostgres)
	}
	for _, u := range []string{"amqp://guest:S3cr3tPW x@127.0.0.1:1/", "://guest:S3cr3tPW@127.0.0.1:1/", `amqp://guest:"S3cr3tPW"@127.0.0.1:1/`} {
		for _, args := range [][]string{
			{"explain", "--broker", u + "?exchange=x", "--subscription", u + "?queue=x", "--inbox=false"},
			{"explain", "--broker", u + "?exchange=x", "--subscription", u + "?queue=x", "--inbox=false", "--json"},
			{"topology", u + "?queue=x"},
			{"probe", u},
			{"dlq", "list", u + "?queue=x", "--wait", "1ms"},
			{"parked", "replay", "--consumer", "c", "--all", "--to", u, "--sqlite", "no-such.db", "--yes"},
		} {
			r := w.run(args...)
			if strings.Contains(r.out+r.errout, "S3cr3tPW") {
				t.Errorf("wary %q printed the password:\n%s%s", args, r.out, r.errout)
			}
		}
	}
}

// sub is the URL of subscription "billing" of the memory topic's URL.
func sub(topicURL string) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(topicURL, "mem://"), "?")
	return "mem://" + name + "/billing"
}

// TestExplainSound: an outbox, an inbox with version checks, PerKey
// handlers on an ordered broker with a delivery limit: five lines, no
// finding, exit 0.
func TestExplainSound(t *testing.T) {
	w := newWary(t)
	topic := "mem://" + unique("explain") + "?profile=partitioned&limit=5"
	r := w.want(cli.ExitOK, "explain", "--broker", topic, "--subscription", sub(topic), "--outbox", "--inbox", "--consumer", "billing", "--ordered", "--versioned",
		"--concurrency", "4", "--per-key")
	r.has(t, "publication: [ok]", "transport:   [ok]", "order per partition", "order:       [ok]", "PerKey serialises",
		"consumption: [ok]", "effects:     [ok]", "parked messages", "no misconfiguration found")
}

// TestExplainGaps: explain states where gaps are held in the store (a
// broker without order per aggregate, idem.GapsAuto's rule, or --gaps
// hold), with the early limit, and broker retry only where it applies (an
// ordered scope, or --gaps retry).
func TestExplainGaps(t *testing.T) {
	w := newWary(t)
	unordered := "mem://" + unique("gaps") + "?limit=5"
	ordered := "mem://" + unique("gaps") + "?profile=partitioned&limit=5"
	base := []string{"explain", "--outbox", "--inbox", "--consumer", "billing", "--versioned"}
	for _, c := range []struct {
		name, topic string
		flags       []string
		want, not   string
	}{
		{"unordered", unordered, nil, "hold gaps in the store (acked on the broker, never retried through it) for up to 1h until", "retry gaps"},
		{"unordered early limit", unordered, []string{"--early-limit", "30m"}, "for up to 30m until the predecessor is applied", "retry gaps"},
		{"unordered retry", unordered, []string{"--gaps", "retry"}, "retry gaps 5 times, then park the aggregate", "hold gaps"},
		{"ordered", ordered, nil, "retry gaps 5 times, then park the aggregate", "hold gaps"},
		{"ordered hold", ordered, []string{"--gaps", "hold"}, "hold gaps in the store", "retry gaps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(append(base, "--broker", c.topic, "--subscription", sub(c.topic)), c.flags...)
			r := w.run(args...)
			r.has(t, c.want)
			if strings.Contains(r.out, c.not) {
				t.Errorf("stdout has %q:\n%s", c.not, r.out)
			}
		})
	}
	w.want(cli.ExitError, append(base, "--broker", unordered, "--subscription", sub(unordered), "--gaps", "sometimes")...)
}

// TestExplainFlagsMisconfiguration: a pipeline with every mistake explain
// knows, each flagged with its fix, and exit 1.
func TestExplainFlagsMisconfiguration(t *testing.T) {
	w := newWary(t)
	cfg := t.TempDir() + "/pipeline.json"
	if err := os.WriteFile(cfg, []byte(`{"outbox": true, "inbox": true, "consumer": "billing", "ordered": true, "concurrency": 4,
		"retention": "1h", "allow_short_retention": true, "keys": [{"provider": "mailer"}], "unkeyed_calls": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A partitioned broker without a delivery limit (limit=-1), a 72h
	// horizon.
	topic := "mem://" + unique("explain") + "?profile=partitioned&limit=-1&retention=72h"
	r := w.want(cli.ExitFinding, "explain", "--broker", topic, "--subscription", sub(topic), "--config", cfg)
	r.has(t, "MISCONFIGURED (transport): no delivery limit", "fix: configure one on the broker",
		"MISCONFIGURED (order): 4 concurrent handlers without PerKey", "fix: set broker.RunOptions.PerKey",
		"MISCONFIGURED (consumption): inbox retention 1h is shorter than the redelivery horizon 72h",
		"MISCONFIGURED (effects): handlers make external calls without idempotency keys")
	var st struct {
		Lines    []struct{ Stage, Verdict string }
		Findings []struct{ Stage, Problem, Fix string }
	}
	w.want(cli.ExitFinding, "explain", "--broker", topic, "--subscription", sub(topic), "--config", cfg, "--json").json(t, &st)
	if len(st.Lines) != 5 || len(st.Findings) != 4 {
		t.Fatalf("JSON statement: %d lines, %d findings; want 5 and 4: %+v", len(st.Lines), len(st.Findings), st)
	}
	for _, f := range st.Findings {
		if f.Fix == "" {
			t.Errorf("finding %q has no fix", f.Problem)
		}
	}

	// Ordering needed on a broker without a scope, a direct publish, no
	// inbox.
	unordered := "mem://" + unique("explain") + "?profile=queue"
	r = w.want(cli.ExitFinding, "explain", "--broker", unordered, "--subscription", sub(unordered), "--ordered", "--inbox=false")
	r.has(t, "MISCONFIGURED (order): ordering is needed but the broker declares no ordering scope",
		"MISCONFIGURED (publication)", "MISCONFIGURED (consumption): deliveries are handled without an inbox")
}

// TestExplainURLContradictsBroker: a subscription URL stating another
// delivery limit than the topic holds is flagged with its fix; the
// broker's limit is the one stated.
func TestExplainURLContradictsBroker(t *testing.T) {
	w := newWary(t)
	name := unique("explain")
	r := w.want(cli.ExitFinding, "explain", "--broker", "mem://"+name+"?limit=10", "--subscription", "mem://"+name+"/billing?limit=5",
		"--outbox", "--inbox", "--consumer", "billing")
	r.has(t, "dead-letters after 10 deliveries (native)",
		"subscription read from the embedded broker's configuration of subscription "+name+"/billing",
		"MISCONFIGURED (transport): the subscription's delivery limit is stated as 5 (limit in the URL), but the broker holds 10 (topic "+name+"'s configuration), which applies",
		"fix: drop limit from the URL")
}

// TestExplainDedupWindowShorterThanRelay: a broker dedup window shorter
// than the relay's retry span, with nothing downstream to catch the
// duplicate.
func TestExplainDedupWindowShorterThanRelay(t *testing.T) {
	w := newWary(t)
	topic := "mem://" + unique("explain") + "?profile=sqsfifo&dedup=1m"
	r := w.want(cli.ExitFinding, "explain", "--broker", topic, "--subscription", sub(topic), "--outbox", "--inbox=false")
	r.has(t, "the broker's dedup window (1m) is shorter than the relay's retry span")
	// With an inbox, the window is not relied on.
	r = w.want(cli.ExitOK, "explain", "--broker", topic, "--subscription", sub(topic), "--outbox", "--inbox", "--consumer", "c")
	r.has(t, "dedup of IDs for 1m per queue")
}

// TestREADMEExplainOrders: docs/operating.md shows what wary explain prints for
// the orders example's setup.
func TestREADMEExplainOrders(t *testing.T) {
	readme, err := os.ReadFile("../../../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "$ wary explain --broker mem://orders --subscription mem://orders/billing --config examples/orders/pipeline.json\n"
	_, block, ok := strings.Cut(string(readme), cmd)
	if !ok {
		t.Fatalf("docs/operating.md lacks %q", cmd)
	}
	block, _, _ = strings.Cut(block, "```")
	w := newWary(t)
	r := w.want(cli.ExitOK, "explain", "--broker", "mem://orders", "--subscription", "mem://orders/billing", "--config", "../../../../examples/orders/pipeline.json")
	if r.out != block {
		t.Fatalf("docs/operating.md shows\n%s\nwary explain prints\n%s", block, r.out)
	}
}

// TestDLQURLs: dlq takes the consumer's subscription URL; a dead-letter
// queue's own URL in the memory driver's former form, and a scheme no
// driver registers, are refused with the reason.
func TestDLQURLs(t *testing.T) {
	w := newWary(t)
	for _, c := range []struct{ url, why string }{
		{"mem://" + unique("orders") + "/billing/dead-letters", "mem://TOPIC/SUBSCRIPTION"},
		{"nosuch://orders/billing", `no driver registered for scheme "nosuch"`},
	} {
		r := w.want(cli.ExitError, "dlq", "list", c.url, "--wait", "100ms")
		if !strings.Contains(r.errout, c.why) || !strings.Contains(r.errout, "open the dead letters of subscription") {
			t.Errorf("wary dlq list %s: stderr %q, want %q", c.url, r.errout, c.why)
		}
	}
}

// TestExplainOrderOneModel (issue 44): the order verdict counts the
// inbox's version checks the same way whatever undoes the broker's order.
// Four handlers without PerKey on an ordered broker, with version checks
// that hold gaps, are ok, as a broker without order is with the same
// inbox; with gaps retried through the broker both are weak, and without
// version checks both are broken. --versioned without an inbox is refused.
func TestExplainOrderOneModel(t *testing.T) {
	w := newWary(t)
	ordered := "mem://" + unique("order") + "?profile=partitioned&limit=5"
	unordered := "mem://" + unique("order") + "?limit=5"
	base := []string{"explain", "--outbox", "--inbox", "--consumer", "billing", "--ordered"}
	for _, c := range []struct {
		name, topic string
		flags       []string
		code        int
		want        string
	}{
		{"ordered, 4 without PerKey, held", ordered, []string{"--concurrency", "4", "--versioned", "--gaps", "hold"}, cli.ExitOK,
			"order:       [ok] the broker orders per partition, but 4 concurrent handlers without PerKey apply an aggregate's events in any order; version checks hold an early event in the store"},
		{"unordered, held", unordered, []string{"--versioned"}, cli.ExitOK, "order:       [ok] the broker keeps no order; version checks hold an early event in the store"},
		{"ordered, 4 without PerKey, retried", ordered, []string{"--concurrency", "4", "--versioned"}, cli.ExitOK,
			"order:       [weak] the broker orders per partition, but 4 concurrent handlers without PerKey apply an aggregate's events in any order; version checks detect gaps, retry them"},
		{"unordered, retried", unordered, []string{"--versioned", "--gaps", "retry"}, cli.ExitOK, "order:       [weak] the broker keeps no order; version checks detect gaps, retry them"},
		{"ordered, 4 without PerKey, no versions", ordered, []string{"--concurrency", "4"}, cli.ExitFinding, "MISCONFIGURED (order): 4 concurrent handlers without PerKey"},
		{"unordered, no versions", unordered, nil, cli.ExitFinding, "MISCONFIGURED (order): ordering is needed but the broker declares no ordering scope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.want(c.code, append(append(base, "--broker", c.topic, "--subscription", sub(c.topic)), c.flags...)...).has(t, c.want)
		})
	}
	r := w.want(cli.ExitError, "explain", "--broker", unordered, "--subscription", sub(unordered), "--outbox", "--ordered", "--versioned")
	r.hasErr(t, "--versioned: version checks are the inbox's", "pass --inbox with --consumer")
	cfg := t.TempDir() + "/pipeline.json"
	if err := os.WriteFile(cfg, []byte(`{"inbox": false, "versioned": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	w.want(cli.ExitError, "explain", "--broker", unordered, "--subscription", sub(unordered), "--config", cfg).hasErr(t, "--versioned: version checks are the inbox's")
}
