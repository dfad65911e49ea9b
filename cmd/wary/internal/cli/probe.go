package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
)

func sortedStrings(s []string) []string { slices.Sort(s); return s }

func (a *app) probeCmd() *cobra.Command {
	var only []string
	var timeout time.Duration
	var sbAdmin string
	c := &cobra.Command{
		Use:   "probe URL",
		Short: "Read an entity's settings, then measure a live broker's promises on scratch entities with those settings copied",
		Long: `probe first reads the entity the URL names, the normal way and read-only
(it opens its subscription and topic, reads the capabilities the driver
states for them, and closes them: nothing is published to it or received
from it), and prints them as "your entity NAME", with what the driver read
from the broker, what it could not (UNKNOWN) and where the URL disagrees
with the broker (CONFLICT).

It then runs the conformance scenarios (package conformance), each on a
scratch topic and queue it creates and deletes, never on your entity:
order within a scope under competing consumers, dedup of a republished ID
inside and after the declared window, lock expiry and redelivery, the
delivery limit to the dead-letter queue with its reason, nack delay, and
the rest. The scratch entities are made with your entity's settings
copied where the probe can set them (the delivery limit, the lock
timeout, the dedup window, a Service Bus session queue; the URL's
parameters, such as partitions=, as before), so that what is measured is
your configuration. On a live broker a lock timeout or dedup window
longer than 2s or 3s is shortened to keep the run short; that, and every
setting it could not copy, is printed with why. On memory (a fake clock)
nothing is shortened. Where the entity cannot be read (no such name on the
broker; a kafka:// consumer group, which a consumer would join), the
scratch entities have the probe's own settings, stated as such.

For each scenario it prints what the scratch entities declare and what
was observed, and exits 1 if any observation contradicts the declaration.
With --json, "entity" is the reading of your entity and "scratch" what
the scratch entities declare, which settings were copied and which not.

URLs: mem://NAME?profile=P&... (the memory driver, on a clock of its own),
rabbit://NAME (server in $WARY_RABBIT_URL; partitions=N),
amqp://USER:PASS@HOST:PORT/VHOST, or kafka://NAME (brokers= or
$WARY_KAFKA_BROKERS; ordered=true for the ordered consumer mode), or
sqsfifo://NAME?region=R (endpoint= or $WARY_SQS_ENDPOINT; dedup_window=
when the server's is shorter than AWS's 5 minutes), or
nats://HOST:PORT/NAME (max_ack_pending=1 for an ordered consumer), or
servicebus://NAME?sessions=B&topic=B (namespace in
$WARY_SERVICEBUS_CONNECTION_STRING; a session queue, or a topic with one
subscription), or gcppubsub://projects/P/topics/NAME?ordering=B&exactly_once=B
(the emulator at $PUBSUB_EMULATOR_HOST, or Application Default
Credentials). An emulator serves the administration API on a port of its
own: --servicebus-admin-endpoint (or $WARY_SERVICEBUS_ADMIN_ENDPOINT, which
every servicebus:// URL's entity is read through, in explain and dlq too)
sends the administration requests there, over plain HTTP on loopback only.`,
		Example: `  wary probe 'mem://scratch?profile=sqsfifo'
  wary probe rabbit://scratch --only order-within-scope,delivery-limit-dead-letters --json
  wary probe 'kafka://scratch?brokers=127.0.0.1:9092&ordered=true'
  wary probe 'servicebus://scratch?sessions=true' --servicebus-admin-endpoint http://127.0.0.1:5300`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			if timeout > 0 {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			if sbAdmin != "" {
				getenv := a.io.Getenv
				a.io.Getenv = func(k string) string {
					if k == EnvServiceBusAdmin {
						return sbAdmin
					}
					return getenv(k)
				}
			}
			sp := &spinner{w: a.io.Err, tty: isTerminal(a.io.Err)}
			res, err := a.probe(ctx, args[0], only, sp)
			sp.stop()
			if err != nil {
				return err
			}
			rows, broken := res.Results, res.Broken
			return a.report(res, func(w io.Writer) {
				printProbeHeader(w, res)
				table(w, "SCENARIO | DECLARED BY THE SCRATCH ENTITIES | OBSERVED", len(rows), func(i int) []any {
					r := rows[i]
					obs := string(r.Outcome)
					if r.Outcome == conformance.Broken {
						obs = "BROKEN: " + r.Detail
					} else if r.Outcome == conformance.NotApplicable {
						obs = "n/a (" + r.Detail + ")"
					}
					return []any{r.Scenario, r.Declared, obs}
				})
				if broken {
					fmt.Fprintln(w, "the broker does not keep what it declares for the scratch entities")
				} else {
					fmt.Fprintln(w, "every observation matches the declaration")
				}
			}, broken)
		},
	}
	c.Flags().StringSliceVar(&only, "only", nil, "run only these scenarios (comma-separated): "+strings.Join(conformance.Scenarios(), ", "))
	c.Flags().StringVar(&sbAdmin, "servicebus-admin-endpoint", "", "send Service Bus administration requests to this endpoint, an emulator's (default $"+EnvServiceBusAdmin+")")
	c.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	return c
}

type probeRow struct {
	conformance.Result
	Declared string `json:"declared"`
}

type probeJSON struct {
	Broker string `json:"broker"`
	// Entity is what was read, read-only, of the entity the URL names.
	Entity entityReading `json:"entity"`
	// Capabilities are those the scratch entities declare, and Scratch
	// says which of the entity's settings they copy.
	Capabilities string        `json:"capabilities"`
	Scratch      scratchReport `json:"scratch"`
	Results      []probeRow    `json:"results"`
	Broken       bool          `json:"broken"`
}

func schemeOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme
}

// printProbeHeader says what was read of the user's entity, and on which
// entities, with which settings, the scenarios were measured.
func printProbeHeader(w io.Writer, res probeJSON) {
	e, sc := res.Entity, res.Scratch
	fmt.Fprintf(w, "probe of %s\n", res.Broker)
	if !e.Read {
		fmt.Fprintf(w, "your entity %s: not read (%s)\n", e.Name, e.Why)
		fmt.Fprintln(w, "measured on scratch entities it created and deleted (not on that entity itself), with the probe's own settings")
		fmt.Fprintf(w, "the scratch entities declare: %s\n", sc.Capabilities)
		fmt.Fprintln(w, "DECLARED is what the scratch entities declare, with the probe's own settings")
		return
	}
	fmt.Fprintf(w, "your entity %s (read only: nothing published to it or received from it): %s\n", e.Name, e.Settings)
	printSource(w, "  ", e.Source)
	if e.TopicRead != "" {
		fmt.Fprintf(w, "  its topic side: %s\n", e.TopicRead)
		printSource(w, "  topic ", e.TopicSource)
	} else if e.TopicNotRead != "" {
		fmt.Fprintf(w, "  its topic side: not read (%s)\n", e.TopicNotRead)
	}
	fmt.Fprintln(w, "measured on scratch entities it created and deleted (not on that entity itself), with your entity's settings copied where it can:")
	if sc.Read != "" {
		fmt.Fprintf(w, "  scratch entity read from %s\n", sc.Read)
	}
	fmt.Fprintf(w, "  the scratch entities declare: %s\n", sc.Capabilities)
	if len(sc.Copied) > 0 {
		fmt.Fprintf(w, "  copied: %s\n", strings.Join(sc.Copied, "; "))
	}
	var notes []string
	for _, n := range sc.NotCopied {
		fmt.Fprintf(w, "  not copied: %s: yours %s, the scratch entities' %s: %s\n", n.Setting, n.Yours, n.Scratch, n.Why)
		if strings.HasPrefix(n.Why, "shortened") {
			notes = append(notes, fmt.Sprintf("%s shortened from %s to %s", n.Setting, n.Yours, n.Scratch))
		}
	}
	how := "your entity's settings copied"
	if len(sc.NotCopied) > 0 {
		how += ", except as said above"
	}
	if len(notes) > 0 {
		how += " (" + strings.Join(notes, ", ") + ")"
	}
	fmt.Fprintf(w, "DECLARED is what the scratch entities declare (%s), not your entity's declaration\n", how)
}

func printSource(w io.Writer, indent string, src *capability.Source) {
	if src == nil {
		return
	}
	if src.Read != "" {
		fmt.Fprintf(w, "%sread from %s\n", indent, src.Read)
	}
	for _, u := range src.Unread {
		fmt.Fprintf(w, "%sUNKNOWN %s: %s\n", indent, u.Setting, u.Why)
	}
	for _, c := range src.Conflicts {
		fmt.Fprintf(w, "%sCONFLICT %s: stated %s, the broker holds %s, which applies\n", indent, c.Setting, c.Stated, c.Held)
	}
}

// lockText renders a subscription's lock: timeout (how to say a
// LockTimeout above 0), "held until settled" or "no lock"; a lock the
// driver could not read (RabbitMQ's consumer_timeout) is unknown, with
// what its fields hold.
func lockText(c capability.Subscription, timeout string) string {
	s := timeout
	switch {
	case c.LockTimeout == capability.LockNone:
		s = "no lock (visible again at once)"
	case c.LockTimeout <= 0:
		s = "held until settled"
	}
	if c.Source.IsUnread(capability.SettingLockTimeout) {
		return "unknown (not read from the broker; declared " + s + ")"
	}
	return s
}

// declared says which part of the declaration a scenario checks.
func declared(scenario string, c conformance.Capabilities) string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	switch {
	case scenario == "order-within-scope" || scenario == "competing-consumers-history" || scenario == "per-key-serial-handler":
		return "order per " + c.Ordering.String()
	case scenario == "head-of-line":
		return "head-of-line " + yes(c.HeadOfLine)
	case strings.HasPrefix(scenario, "dedup"):
		if c.DedupWindow <= 0 {
			return "no dedup"
		}
		return fmt.Sprintf("dedup %s per %s", c.DedupWindow, c.DedupScope)
	case strings.HasPrefix(scenario, "lock-extension"):
		return "lock extendable " + yes(c.LockExtendable)
	case strings.HasPrefix(scenario, "lock") || scenario == "held-without-lock-timeout" || scenario == "crash-redelivers-unacked" || scenario == "ack":
		if c.LockTimeout > 0 {
			return lockText(c.Subscription, "lock "+c.LockTimeout.String())
		}
		return lockText(c.Subscription, "")
	case strings.HasPrefix(scenario, "nack-delay"):
		return "nack delay " + yes(c.NackDelay)
	case scenario == "delivery-limit-dead-letters":
		return fmt.Sprintf("limit %d (%s)", c.DeliveryLimit, c.DeliveryLimitMode)
	case strings.HasPrefix(scenario, "dead-letter"):
		return "dead-letter " + yes(c.DeadLetter)
	case strings.HasPrefix(scenario, "delivery-count"):
		return "delivery count " + yes(c.DeliveryCount)
	case scenario == "ack-model":
		return "ack " + c.AckModel.String()
	case scenario == "redelivery-horizon":
		return "horizon " + capability.HorizonString(c.RedeliveryHorizon)
	case scenario == "oversized-rejected":
		return fmt.Sprintf("max size %d", c.MaxMessageSize)
	case scenario == "key-required":
		return "key required " + yes(c.KeyRequired)
	case scenario == "max-batch-size-split":
		return fmt.Sprintf("max batch %d", c.MaxBatchSize)
	}
	return "-"
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// spinner shows, on stderr, which scenario runs and for how long; when
// stderr is not a terminal, only a line per finished scenario.
type spinner struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	done chan struct{}
	wg   sync.WaitGroup
}

func (s *spinner) Start(scenario string) {
	s.stop()
	if !s.tty {
		return
	}
	s.done = make(chan struct{})
	start := time.Now()
	s.wg.Go(func() {
		frames := `|/-\`
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			s.mu.Lock()
			fmt.Fprintf(s.w, "\r%c %-40s %5.1fs", frames[i%len(frames)], scenario, time.Since(start).Seconds())
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
}

// Done ends a scenario's progress: on a terminal the spinner's line is
// erased (the table that follows on stdout shows the outcome, and a
// terminal shows both streams); elsewhere, a log, a line per scenario.
func (s *spinner) Done(r conformance.Result) {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty {
		fmt.Fprintf(s.w, "\r%60s\r", "")
		return
	}
	fmt.Fprintf(s.w, "%-48s %s\n", r.Scenario, r.Outcome)
}

func (s *spinner) stop() {
	if s.done != nil {
		close(s.done)
		s.wg.Wait()
		s.done = nil
	}
}
