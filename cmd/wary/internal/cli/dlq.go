package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

type dlqFlags struct {
	limit int
	wait  time.Duration
	ids   []string
	all   bool
	to    string
}

func (f *dlqFlags) add(c *cobra.Command) {
	c.Flags().IntVar(&f.limit, "limit", 100, "read at most this many dead letters")
	c.Flags().DurationVar(&f.wait, "wait", 3*time.Second, "how long to wait for the first dead letters")
}

func (a *app) dlqCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "List, replay or discard dead-lettered messages",
		Long: `SUBSCRIPTION_URL is the consumer's own subscription URL, the one its configuration
holds; wary opens the dead letters of that subscription, wherever its
driver keeps them:
  mem://TOPIC/SUBSCRIPTION
      the subscription's dead-letter queue (the memory driver, in this process)
  rabbit://QUEUE?dead_letter_exchange=QUEUE.dlx
      QUEUE.dlq, the topology's dead-letter queue (add dead_letter_queue=NAME
      when the dead-letter exchange is not QUEUE.dlx)
  kafka://GROUP?topic=TOPIC&dead_letter_topic=DLT
      the topic DLT, read by the consumer group GROUP.dead-letters
  sqsfifo://QUEUE.fifo
      the queue that the RedrivePolicy of QUEUE.fifo names
  gcppubsub://projects/P/subscriptions/S
      the subscription of its dead-letter policy's topic (the only one, or
      dead_letter_subscription=NAME)
  servicebus://QUEUE, servicebus://TOPIC/Subscriptions/SUB
      its dead-letter sub-queue ($DeadLetterQueue)
  nats://HOST:PORT/STREAM?consumer=NAME
      the subject wary.dlq.STREAM.NAME of the stream STREAM_DLQ, read by a
      durable consumer NAME there
list peeks where the broker can (Service Bus: nothing changes); elsewhere
it reads dead letters and puts them back (nothing is removed). On SQS
that raises their receive count by one per look; on RabbitMQ the put-back
is basic.nack after cancelling the consumer, which a quorum queue counts
once per look before RabbitMQ 4.3 and not toward its limit from 4.3.
Harmless on the dead-letter queues wary declares (no delivery limit), a
risk on a RabbitMQ (before 4.3) or SQS dead-letter queue declared with
one, which wary explain reports for a RabbitMQ subscription. replay
publishes the selected ones to --to with their original ID, key and
headers plus wary-replayed-by (who, when, and the dead-letter reason),
then removes them from the dead-letter queue. discard removes them.
On a Kafka dead-letter topic (cumulative acknowledgements) only the
first dead letters, in order, can be chosen.`,
		Example: `  wary dlq list 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx'
  wary dlq replay 'mem://orders/billing' --id order-3/placed --to mem://orders --yes
  wary dlq discard 'servicebus://orders/Subscriptions/billing' --all --yes`,
	}
	c.AddCommand(a.dlqList(), a.dlqMove("replay"), a.dlqMove("discard"))
	return c
}

type deadJSON struct {
	MessageID string            `json:"message_id"`
	Key       string            `json:"key"`
	Reason    string            `json:"reason"`
	Attempt   int               `json:"attempt"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Encoding  string            `json:"body_encoding"`
}

// toDeadJSON is d as printed; its body only with body (a listing that
// does not show them keeps no copy).
func toDeadJSON(d *broker.Delivery, body bool) deadJSON {
	return deadOf(d.Message, d.Attempt, body)
}

// deadOf is m, delivered attempt times, as printed.
func deadOf(m *broker.Message, attempt int, body bool) deadJSON {
	j := deadJSON{MessageID: m.ID, Key: m.Key, Reason: m.Headers.Get(driver.HeaderDeadLetterReason), Attempt: attempt, Headers: m.Headers.Map()}
	if body {
		j.Body, j.Encoding = bodyText(m.Body)
	}
	return j
}

// readDead receives up to f.limit deliveries: it waits f.wait for the
// first ones (a consumer may take that long to join), and then stops when
// the queue stayed empty for a second (or f.wait, if shorter).
func readDead(ctx context.Context, s *broker.Subscription, f *dlqFlags) ([]*broker.Delivery, error) {
	var out []*broker.Delivery
	for len(out) < f.limit {
		idle := f.wait
		if len(out) > 0 {
			idle = min(f.wait, time.Second)
		}
		rctx, cancel := context.WithTimeout(ctx, idle)
		ds, err := s.Receive(rctx, min(f.limit-len(out), 100))
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// release puts deliveries back on the queue.
func release(ds []*broker.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range ds {
		_ = d.Nack(ctx, 0)
	}
}

func printDead(w io.Writer, ds []deadJSON) {
	if len(ds) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	table(w, "MESSAGE | KEY | ATTEMPT | REASON | HEADERS", len(ds), func(i int) []any {
		d := ds[i]
		return []any{d.MessageID, d.Key, d.Attempt, d.Reason, len(d.Headers)}
	})
}

func (a *app) dlqList() *cobra.Command {
	var f dlqFlags
	c := &cobra.Command{
		Use:     "list SUBSCRIPTION_URL",
		Short:   "List dead letters with their reason (exit 1 if there are any); nothing is removed",
		Example: `  wary dlq list 'mem://orders/billing' --json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			s, err := a.openDeadLetters(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			out, err := listDead(ctx, s, &f, true)
			if err != nil {
				return err
			}
			return a.report(out, func(w io.Writer) { printDead(w, out) }, len(out) > 0)
		},
	}
	f.add(c)
	return c
}

// dlqMove is replay or discard.
func (a *app) dlqMove(verb string) *cobra.Command {
	var f dlqFlags
	c := &cobra.Command{
		Use:   verb + " SUBSCRIPTION_URL (--id ID... | --all)",
		Short: "Replay dead letters to a topic with their original ID and headers",
		Example: fmt.Sprintf(`  wary dlq %s 'rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx' --id order-3/placed`, verb) +
			map[string]string{"replay": " --to rabbit://orders", "discard": " --yes"}[verb],
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !f.all && len(f.ids) == 0 {
				return fmt.Errorf("choose what to %s: --id ID (repeatable) or --all", verb)
			}
			if verb == "replay" && f.to == "" {
				return errors.New("replay needs --to TOPIC_URL, the topic the consumer reads from")
			}
			ctx := c.Context()
			s, err := a.openDeadLetters(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			var t *broker.Topic
			if verb == "replay" {
				if t, err = a.openTopic(ctx, f.to); err != nil {
					return err
				}
				defer t.Close()
				a.warnDedup(t)
			}
			done, missing, err := moveDead(ctx, s, t, &f, func(n int) error { return a.confirm(fmt.Sprintf("%s %d dead letter(s)", verb, n)) })
			if err != nil {
				return err
			}
			res := map[string]any{verb + "ed": done, "not_found": missing}
			return a.report(res, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %d dead letter(s)\n", verb, len(done))
				printDead(w, done)
				if len(missing) > 0 {
					fmt.Fprintf(w, "not found: %v\n", missing)
				}
			}, len(missing) > 0)
		},
	}
	f.add(c)
	a.yesFlag(c)
	c.Flags().StringArrayVar(&f.ids, "id", nil, "message ID to "+verb+" (repeatable)")
	c.Flags().BoolVar(&f.all, "all", false, verb+" every dead letter read")
	if verb == "replay" {
		c.Flags().StringVar(&f.to, "to", "", "topic URL to replay to (required)")
	} else {
		c.Short = "Remove dead letters for good"
	}
	return c
}

// prefix reports whether chosen are the first deliveries of ds, in order.
func prefix(ds, chosen []*broker.Delivery) bool {
	for i, d := range chosen {
		if ds[i] != d {
			return false
		}
	}
	return true
}
