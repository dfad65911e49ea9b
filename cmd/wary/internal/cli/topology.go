package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/topology"
	"github.com/wary-go/wary/redact"
)

// topologyJSON is what wary topology prints for one URL.
type topologyJSON struct {
	URL      string       `json:"url"`
	Entities []entityJSON `json:"entities"`
	// Note says why there is nothing to declare (mem://).
	Note string `json:"note,omitempty"`
}

type entityJSON struct {
	topology.Entity
	// Declared: this run declared it (--apply).
	Declared bool `json:"declared,omitempty"`
}

func (a *app) topologyCmd() *cobra.Command {
	var apply bool
	c := &cobra.Command{
		Use:   "topology URL [URL...] [--apply]",
		Short: "Show, and with --apply declare, the exchanges, queues, topics and subscriptions URLs describe",
		Long: `topology reads each URL as the driver's openers read it, with the same
parameters, and shows the entities it describes: each with the settings wary
declares it with, whether it exists, and, for an existing one, where the
settings it holds differ from the URL's. Without --apply it changes nothing
(a dry run) and exits 1 if an entity is missing or differs. --apply declares
the missing ones with the driver's own code (the same that declares them
from Go) and prints what it declared; it never changes or deletes an
existing entity, so a difference is reported and left as it is (exit 1),
for you to resolve. As nothing existing is touched, --apply asks nothing.

  amqp://USER:PASS@HOST/VHOST?exchange=E, rabbit://E (a topic's URL)
      the exchange E (fanout; direct with partitions=N)
  amqp://…?queue=Q&…, rabbit://Q?… with a subscription's parameter
      the quorum queue Q (Q.0 … Q.N-1 with partitions=N), single active
      consumer, x-delivery-limit from delivery_limit; with
      dead_letter_exchange=Q.dlx (or dead_letter_queue=D) the dead-letter
      exchange and queue; with exchange=E the exchange E, the queue bound
  sqsfifo://Q.fifo?max_receive=N&visibility=D
      the FIFO queue; with max_receive, its dead-letter queue Q-dlq.fifo
      and a RedrivePolicy after N receives
  gcppubsub://projects/P/subscriptions/S?topic=T&ordering=B&exactly_once=B&
      ack_deadline=D&max_delivery_attempts=N
      the topic T and the pull subscription S; with max_delivery_attempts,
      the dead-letter topic S-dead, its subscription S-dead and the policy
  servicebus://Q, servicebus://T/Subscriptions/S (with lock_duration,
  max_delivery_count, ttl, dedup_window, max_message_size, sessions)
      the queue, or the topic and its subscription, through the
      administration API ($WARY_SERVICEBUS_ADMIN_ENDPOINT for an emulator)
  nats://HOST:PORT/STREAM?consumer=C&subject=S (with ack_wait, max_deliver,
  max_ack_pending, duplicate_window, max_age)
      the stream capturing S and S.>; with consumer, its durable pull
      consumer and the dead-letter stream STREAM_DLQ
mem:// creates what it opens: there is nothing to declare. kafka:// topics
are created with Kafka's own tools.`,
		Example: `  wary topology 'amqp://guest:guest@127.0.0.1:5672/?exchange=orders'
  wary topology rabbit://orders 'rabbit://orders.billing?exchange=orders&delivery_limit=5&dead_letter_exchange=orders.billing.dlx' --apply
  wary topology 'sqsfifo://orders.fifo?max_receive=5' --apply --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var out []topologyJSON
			found := false
			for _, raw := range args {
				t, f, err := a.topology(c.Context(), raw, apply)
				if err != nil {
					return err
				}
				out = append(out, t)
				found = found || f
			}
			return a.report(out, func(w io.Writer) { printTopology(w, out, apply) }, found)
		},
	}
	c.Flags().BoolVar(&apply, "apply", false, "declare the entities that are missing (nothing existing is changed)")
	return c
}

// topology plans (and with apply, declares) one URL's topology; found
// reports something missing (before apply) or differing.
func (a *app) topology(ctx context.Context, raw string, apply bool) (topologyJSON, bool, error) {
	t := topologyJSON{URL: redact.String(raw), Entities: []entityJSON{}}
	s, err := a.withEnv(raw)
	if err != nil {
		return t, false, err
	}
	p, err := topology.PlanURL(ctx, broker.DefaultURLMux(), s)
	if errors.Is(err, errors.ErrUnsupported) {
		if u, perr := url.Parse(raw); perr == nil && u.Scheme == "mem" {
			t.Note = "the memory broker creates topics and subscriptions when they open: nothing to declare"
			return t, false, nil
		}
	}
	if err != nil {
		return t, false, &brokerErr{what: "topology of " + t.URL, err: err}
	}
	missing := len(p.Missing()) > 0
	for _, e := range p.Entities {
		t.Entities = append(t.Entities, entityJSON{Entity: e, Declared: apply && !e.Exists})
	}
	if apply && missing {
		if err := p.Apply(ctx); err != nil {
			return t, false, &brokerErr{what: "declare the topology of " + t.URL, err: err}
		}
		for i := range t.Entities {
			t.Entities[i].Exists = true
		}
		missing = false
	}
	return t, missing || p.Differs(), nil
}

func printTopology(w io.Writer, ts []topologyJSON, apply bool) {
	for i, t := range ts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "topology of %s\n", t.URL)
		if t.Note != "" {
			fmt.Fprintf(w, "  %s\n", t.Note)
			continue
		}
		table(w, "  STATE | KIND | NAME | SETTINGS", len(t.Entities), func(i int) []any {
			e := t.Entities[i]
			state := "exists"
			switch {
			case e.Declared:
				state = "declared"
			case !e.Exists:
				state = "missing"
			case len(e.Conflicts) > 0:
				state = "DIFFERS"
			}
			return []any{"  " + state, e.Kind, e.Name, strings.Join(e.Settings, ", ")}
		})
		missing, differ := 0, 0
		for _, e := range t.Entities {
			for _, d := range e.Conflicts {
				fmt.Fprintf(w, "  %s %s: %s is %s, the URL states %s (left as it is: change or delete it yourself, or change the URL)\n", e.Kind, e.Name, d.Setting, d.Held, d.Stated)
			}
			if e.Unread != "" && e.Exists && !e.Declared {
				fmt.Fprintf(w, "  %s %s: its settings could not all be read: %s\n", e.Kind, e.Name, e.Unread)
			}
			if !e.Exists {
				missing++
			}
			if len(e.Conflicts) > 0 {
				differ++
			}
		}
		switch {
		case missing > 0:
			fmt.Fprintf(w, "%d missing: run again with --apply to declare them\n", missing)
		case differ > 0:
			fmt.Fprintf(w, "%d differ from the URL\n", differ)
		case apply:
			fmt.Fprintln(w, "all exist as the URL states")
		default:
			fmt.Fprintln(w, "all exist as the URL states: nothing to declare")
		}
	}
}

// brokerErr is a broker error met while doing what; its text does not
// repeat the broker error's own "wary: OP" prefix, which Run's "wary: "
// would otherwise double.
type brokerErr struct {
	what string
	err  error
	hint string // how to fix it ("": none)
}

func (e *brokerErr) Error() string {
	if e.hint != "" {
		return e.text() + " (" + e.hint + ")"
	}
	return e.text()
}

func (e *brokerErr) text() string {
	msg := e.err.Error()
	var be *broker.Error
	if errors.As(e.err, &be) {
		msg = strings.TrimPrefix(msg, "wary: "+be.Op)
		msg = strings.TrimPrefix(msg, " ")
		if !strings.HasPrefix(msg, "(") {
			return e.what + ": " + strings.TrimPrefix(msg, ": ")
		}
		return e.what + " " + msg
	}
	return e.what + ": " + msg
}

func (e *brokerErr) Unwrap() error { return e.err }
