package cli_test

import (
	"github.com/wary-go/wary/broker"

	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/sqlite"
	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/nodeproc"
)

// example is what one line of a command's Example does when run in the
// world exampleWorld prepares: its exit code, and why that is what the
// command means there.
type example struct {
	code int
	why  string
	// stdin answers the confirmation prompt of a destructive example
	// written without --yes, as its operator would.
	stdin string
	// parseOnly, if set, says why the line is only parsed (the command
	// found, its flags and arguments accepted), not run: the service it
	// names is not one this test runs.
	parseOnly string
}

// examples holds every line of every command's Example text. A new
// example needs an entry: what it needs and what it exits.
var examples = map[string]example{
	// wary
	`wary explain --broker rabbit://orders --subscription 'rabbit://orders.billing?delivery_limit=5&dead_letter_exchange=orders.billing.dlx' --postgres "$WARY_POSTGRES_URL" --consumer billing`: {
		code: cli.ExitOK, why: "the queue holds the limit and dead-letter exchange the URL states"},
	`wary parked list --sqlite shop.db`:          {code: cli.ExitFinding, why: "messages are parked"},
	`wary probe 'mem://scratch?profile=sqsfifo'`: {code: cli.ExitOK, why: "the memory driver keeps its word"},
	// explain
	`wary explain --broker 'mem://orders?profile=queue&limit=5' --subscription mem://orders/billing --sqlite shop.db --consumer billing --ordered --versioned`: {
		code: cli.ExitOK, why: "version checks that hold gaps restore the order"},
	`wary explain --broker rabbit://orders --subscription 'rabbit://orders.billing?nack_delay=true' --postgres "$WARY_POSTGRES_URL" --config pipeline.json --json`: {
		code: cli.ExitOK, why: "the orders example's pipeline on the queue it declares"},
	// parked
	`wary parked early --sqlite shop.db`:  {code: cli.ExitOK, why: "no early event is held"},
	`wary parked show 7 --sqlite shop.db`: {code: cli.ExitOK, why: "message 7 is parked"},
	`wary parked replay --consumer billing --aggregate order-3 --to rabbit://orders --postgres "$WARY_POSTGRES_URL"`: {
		code: cli.ExitOK, why: "order-3's parked messages are replayed once confirmed", stdin: "y\n"},
	`wary parked discard --consumer billing --id 7 --yes --sqlite shop.db`: {code: cli.ExitOK, why: "message 7 is discarded"},
	`wary parked list --consumer billing --aggregate order-3 --json --postgres "$WARY_POSTGRES_URL"`: {
		code: cli.ExitFinding, why: "order-3 has parked messages"},
	`wary parked show 7 --sqlite shop.db --json`: {code: cli.ExitOK, why: "message 7 is parked"},
	`wary parked replay --consumer billing --aggregate order-3 --to 'mem://orders' --sqlite shop.db --yes`: {
		code: cli.ExitOK, why: "order-3's parked messages are replayed"},
	`wary parked discard --consumer billing --id 7 --sqlite shop.db`: {
		code: cli.ExitOK, why: "message 7 is discarded once confirmed", stdin: "y\n"},
	`wary parked discard --consumer billing --aggregate order-3 --yes --postgres "$WARY_POSTGRES_URL"`: {
		code: cli.ExitOK, why: "order-3's parked messages are discarded"},
	`wary parked early --consumer billing --early-limit 30m --json --postgres "$WARY_POSTGRES_URL"`: {
		code: cli.ExitOK, why: "no early event is held"},
	// outbox
	`wary outbox status --postgres "$WARY_POSTGRES_URL"`:        {code: cli.ExitFinding, why: "rows 42 and 43 are quarantined"},
	`wary outbox list --state quarantined --sqlite shop.db`:     {code: cli.ExitOK, why: "a listing (status is what exits 1)"},
	`wary outbox requeue 42 --sqlite shop.db --yes`:             {code: cli.ExitOK, why: "row 42 is requeued"},
	`wary outbox status --postgres "$WARY_POSTGRES_URL" --json`: {code: cli.ExitFinding, why: "rows 42 and 43 are quarantined"},
	`wary outbox list --aggregate order-3 --state pending,quarantined --json --postgres "$WARY_POSTGRES_URL"`: {
		code: cli.ExitOK, why: "a listing (status is what exits 1)"},
	`wary outbox requeue 42 43 --sqlite shop.db --yes`: {code: cli.ExitOK, why: "rows 42 and 43 are requeued"},
	`wary outbox discard 42 43 --sqlite shop.db --yes`: {code: cli.ExitOK, why: "rows 42 and 43 are discarded"},
	// dlq
	`wary dlq list 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx'`:    {code: cli.ExitFinding, why: "a message is dead-lettered"},
	`wary dlq replay 'mem://orders/billing' --id order-3/placed --to mem://orders --yes`: {code: cli.ExitOK, why: "the dead letter is replayed"},
	`wary dlq discard 'servicebus://orders/Subscriptions/billing' --all --yes`: {
		parseOnly: "Service Bus is not among the services this test runs"},
	`wary dlq list 'mem://orders/billing' --json`: {code: cli.ExitFinding, why: "a message is dead-lettered"},
	`wary dlq replay 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --id order-3/placed --to rabbit://orders`: {
		code: cli.ExitOK, why: "the dead letter is replayed once confirmed", stdin: "y\n"},
	`wary dlq discard 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --id order-3/placed --yes`: {
		code: cli.ExitOK, why: "the dead letter is discarded"},
	// probe
	`wary probe rabbit://scratch --only order-within-scope,delivery-limit-dead-letters --json`: {
		code: cli.ExitOK, why: "RabbitMQ keeps what its scratch queues declare"},
	`wary probe 'kafka://scratch?brokers=127.0.0.1:9092&ordered=true'`: {
		parseOnly: "Kafka is not among the services this test runs"},
	`wary probe 'servicebus://scratch?sessions=true' --servicebus-admin-endpoint http://127.0.0.1:5300`: {
		parseOnly: "Service Bus is not among the services this test runs"},
	// topology
	`wary topology 'amqp://guest:guest@127.0.0.1:5672/?exchange=orders'`: {code: cli.ExitOK, why: "the exchange exists"},
	`wary topology rabbit://orders 'rabbit://orders.billing?exchange=orders&delivery_limit=5&dead_letter_exchange=orders.billing.dlx' --apply`: {
		code: cli.ExitOK, why: "declaring what exists, as it is, changes nothing"},
	`wary topology 'sqsfifo://orders.fifo?max_receive=5' --apply --json`: {
		parseOnly: "SQS is not among the services this test runs"},
	// console
	`wary console --broker rabbit://orders --subscription 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --postgres "$WARY_POSTGRES_URL" --consumer billing`: {
		code: cli.ExitOK, why: "it serves until stopped"},
	`WARY_CONSOLE_TOKEN=$(openssl rand -hex 16) wary console --addr 0.0.0.0:7070 --read-only --broker rabbit://orders --subscription 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --postgres "$WARY_POSTGRES_URL" --consumer billing`: {
		code: cli.ExitOK, why: "it serves, with a token, until stopped"},
	`wary console --broker rabbit://orders --subscription 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --mysql "$WARY_MYSQL_URL" --consumer billing`: {
		code: cli.ExitOK, why: "it serves until stopped, its audit log in the MySQL store's database"},
	// version
	`wary version`:        {code: cli.ExitOK, why: "it prints the version"},
	`wary version --json`: {code: cli.ExitOK, why: "it prints the version"},
}

// TestHelpExamplesRun: every line of every command's Example text (wary
// --help and each command's) runs as written, in process, against real
// local services, and exits as the command means there; none is a usage
// error (exit 2).
//
// Each line runs in a world of its own, made before it, so that what one
// example changes (a discard, a replay) is not what the next finds:
//   - a temporary directory as the working directory, with shop.db (the
//     SQLite store, migrated) for --sqlite shop.db and, for --config
//     pipeline.json, the orders example's pipeline.json;
//   - "$WARY_POSTGRES_URL": the test's PostgreSQL database, with a fresh
//     schema (migrated) first in its search_path;
//   - "$WARY_MYSQL_URL": a MySQL store in a fresh database of the test's
//     server (testkit.MySQL);
//   - the same content in each store: parked messages 1 to 7 of consumer
//     billing (7 is order-3's), and outbox rows 1 to 43, 42 and 43
//     quarantined (42 is order-3's), so that the destructive examples
//     (show, replay, discard, requeue) act on what they name;
//   - rabbit:// URLs (and the example's amqp:// URL, which names the same
//     local server) on $WARY_RABBIT_URL: the exchange and the quorum queue
//     the orders examples name (delivery limit 5, dead-letter exchange and
//     queue), with one message, order-3/placed, dead-lettered;
//   - mem:// URLs: the same topic, subscription and dead letter.
//
// The name "orders" in a line is replaced by one of the test's own, so
// that a line sees what a fresh wary process sees (the memory broker is
// the process's, and the RabbitMQ server is shared). A destructive example
// written without --yes gets "y" at its prompt, as from its operator. A
// console example serves on port 0 of the address it names (127.0.0.1
// without --addr) and is stopped once it listens. Lines naming Kafka,
// SQS or Service Bus, which this test does not run, are parsed only: the
// command is found, and its flags and arguments are accepted.
func TestHelpExamplesRun(t *testing.T) {
	var lines []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for l := range strings.Lines(c.Example) {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(lines, l) {
				lines = append(lines, l)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(cli.Root())
	for _, l := range lines {
		if _, ok := examples[l]; !ok {
			t.Errorf("the example %q has no entry in examples", l)
		}
	}
	for l := range examples {
		if !slices.Contains(lines, l) {
			t.Errorf("examples has %q, which no command shows", l)
		}
	}
	for _, l := range lines {
		ex, ok := examples[l]
		if !ok {
			continue
		}
		t.Run(l, func(t *testing.T) { runExample(t, l, ex) })
	}
}

func runExample(t *testing.T, line string, ex example) {
	name := strings.ReplaceAll(unique("wary-ex"), "-", "_")
	env := map[string]string{}
	words := exampleWords(t, strings.ReplaceAll(line, "orders", name), env)
	if words[0] != "wary" {
		t.Fatalf("the example %q does not run wary", line)
	}
	args := words[1:]
	if ex.parseOnly != "" {
		parseExample(t, args)
		return
	}
	root := repoRoot(t)
	dir := t.TempDir()
	t.Chdir(dir)
	has := func(s string) bool { return strings.Contains(line, s) }
	if has("--sqlite shop.db") {
		st, err := sqlite.Open(t.Context(), filepath.Join(dir, "shop.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		fillStore(t, sqliteShop(st))
		st.Close()
	}
	if has("pipeline.json") {
		b, err := os.ReadFile(filepath.Join(root, "examples", "orders", "pipeline.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pipeline.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if has(`"$WARY_POSTGRES_URL"`) {
		st, flags := pgStore(t)
		fillStore(t, pgShop(st))
		sep := "?"
		if strings.Contains(flags[1], "?") {
			sep = "&"
		}
		env[cli.EnvPostgres] = flags[1] + sep + "search_path=" + flags[3]
	}
	if has(`"$WARY_MYSQL_URL"`) {
		_, shop, flags := mysqlStore(t)
		fillStore(t, shop)
		env[mysqltest.Env] = flags[1]
	}
	if has("rabbit://") || has("amqp://") {
		rabbitWorld(t, name, env)
	}
	if has("mem://" + "orders") {
		memWorld(t, name, args)
	}
	// The words again, now that the environment is known.
	args = exampleWords(t, strings.ReplaceAll(line, "orders", name), env)[1:]
	if args[0] == "console" {
		runConsole(t, args, env)
		return
	}
	w := newWary(t)
	w.env, w.stdin = env, ex.stdin
	r := w.run(args...)
	if r.code != ex.code {
		t.Fatalf("exit %d, want %d (%s)\nstdout:\n%s\nstderr:\n%s", r.code, ex.code, ex.why, r.out, r.errout)
	}
}

// exampleWords splits line as sh would for the forms the examples use:
// words in single quotes, "$NAME" and $NAME (from env, else the test's
// environment), and a leading NAME=$(openssl rand -hex 16), which sets
// env[NAME] to 32 random hex digits.
func exampleWords(t *testing.T, line string, env map[string]string) []string {
	t.Helper()
	if k, rest, ok := strings.Cut(line, "=$(openssl rand -hex 16) "); ok && !strings.Contains(k, " ") {
		if _, set := env[k]; !set {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			env[k] = hex.EncodeToString(b)
		}
		line = rest
	}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return os.Getenv(k)
		})
	}
	var words []string
	for _, w := range strings.Fields(line) {
		switch {
		case strings.HasPrefix(w, "'") && strings.HasSuffix(w, "'") && len(w) > 1:
			words = append(words, w[1:len(w)-1])
		case strings.HasPrefix(w, `"`) && strings.HasSuffix(w, `"`) && len(w) > 1:
			words = append(words, expand(w[1:len(w)-1]))
		case strings.ContainsAny(w, `'"\()`):
			t.Fatalf("the example %q has a word (%s) this test cannot split", line, w)
		default:
			words = append(words, expand(w))
		}
	}
	return words
}

// parseExample finds the command args name and checks that its flags and
// arguments are accepted, without running it.
func parseExample(t *testing.T, args []string) {
	t.Helper()
	c, rest, err := cli.Root().Find(args)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ParseFlags(rest); err != nil {
		t.Fatalf("%s: %v", c.CommandPath(), err)
	}
	if err := c.ValidateArgs(c.Flags().Args()); err != nil {
		t.Fatalf("%s: %v", c.CommandPath(), err)
	}
	if err := c.ValidateRequiredFlags(); err != nil {
		t.Fatalf("%s: %v", c.CommandPath(), err)
	}
}

// fillStore parks messages 1 to 7 of consumer billing (order-1, order-2
// and order-3's versions 1 to 3, 7 the last) and adds outbox rows 1 to
// 43, quarantining 42 (order-3's) and 43.
func fillStore[Tx any](t *testing.T, st shopStore[Tx]) {
	t.Helper()
	var msgs []*broker.Message
	for i, agg := range []string{"order-1", "order-1", "order-2", "order-2", "order-3", "order-3", "order-3"} {
		v := int64(i%2 + 1)
		if agg == "order-3" {
			v = int64(i - 3)
		}
		msgs = append(msgs, event(fmt.Sprintf("%s/v%d", agg, v), agg, v))
	}
	park(t, st, "billing", "gap", msgs...)
	// Rows 1 to 41 are sent; 42 and 43 quarantined by a relay to a topic
	// that takes no message this large (at its first failure).
	relay := func(topicURL string, aggs ...string) *outbox.Relay {
		msgs := make([]*outbox.Message, len(aggs))
		for i, agg := range aggs {
			msgs[i] = &outbox.Message{AggregateID: agg, Version: 1, Type: "order.placed", Payload: []byte("{}")}
		}
		addRows(t, st, msgs...)
		r, err := st.newRelay(mustOpenTopic(t, topicURL), &outbox.RelayOptions{Telemetry: broker.Telemetry{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var sent []string
	for i := range 41 {
		sent = append(sent, fmt.Sprintf("order-%d", 100+i))
	}
	relay("mem://"+unique("sent"), sent...)
	small := relay("mem://"+unique("small")+"?maxsize=10", "order-3", "order-200")
	rows, err := small.Quarantined(t.Context(), 0)
	if err != nil || len(rows) != 2 || rows[0].RowID != 42 || rows[1].RowID != 43 {
		t.Fatalf("quarantined outbox rows %+v (%v), want 42 and 43", rows, err)
	}
}

// rabbitWorld declares, on the local RabbitMQ server, the exchange name,
// the quorum queue name.billing (delivery limit 5) and its dead-letter
// exchange and queue, deleted at cleanup (rabbitTopologyNamed), and
// dead-letters order-3/placed; env gets the server's URL, which probe
// reads through the command.
func rabbitWorld(t *testing.T, name string, env map[string]string) {
	t.Helper()
	top, _, sub, _ := rabbitTopologyNamed(t, name)
	env[rabbit.ServerURLEnv] = os.Getenv(rabbit.ServerURLEnv)
	publish(t, top, event("order-3/placed", "order-3", 1))
	if err := receive(t, sub, 1)[0].DeadLetter(t.Context(), "poison: cannot parse"); err != nil {
		t.Fatal(err)
	}
}

// memWorld opens the memory topic name (with the parameters the example
// gives its URL, which configure it as the example's own process would)
// and its subscription billing, and dead-letters order-3/placed there.
func memWorld(t *testing.T, name string, args []string) {
	t.Helper()
	topicURL := "mem://" + name
	for _, a := range args {
		if strings.HasPrefix(a, topicURL+"?") {
			topicURL = a
		}
	}
	top := mustOpenTopic(t, topicURL)
	sub := mustOpenSub(t, "mem://"+name+"/billing")
	publish(t, top, event("order-3/placed", "order-3", 1))
	if err := receive(t, sub, 1)[0].DeadLetter(t.Context(), "poison: cannot parse"); err != nil {
		t.Fatal(err)
	}
}

// runConsole runs a console example on port 0 of the address it names
// (127.0.0.1 without --addr) until it listens, then stops it, and wants
// it to have exited 0.
func runConsole(t *testing.T, args []string, env map[string]string) {
	t.Helper()
	if i := slices.Index(args, "--addr"); i >= 0 && i+1 < len(args) {
		host, _, _ := strings.Cut(args[i+1], ":")
		args[i+1] = host + ":0"
	} else {
		args = append(args, "--addr", "127.0.0.1:0")
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errout := &nodeproc.SyncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- cli.Run(ctx, args, cli.IO{Out: pw, Err: errout, Getenv: func(k string) string { return env[k] }})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err != nil || !strings.Contains(line, "http://") {
		cancel()
		t.Fatalf("the console did not start (exit %d): %q %v: %s", <-code, line, err, errout.String())
	}
	cancel()
	if c := <-code; c != cli.ExitOK {
		t.Fatalf("the console exited %d: %s", c, errout.String())
	}
}

// repoRoot is the repository's root, four folders up.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "..", "..")
}
