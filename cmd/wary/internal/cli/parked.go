package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/redact"
)

type parkedFlags struct {
	store               storeFlags
	consumer, aggregate string
	all                 bool
	id                  int64
	limit               int
	to                  string
}

func (f *parkedFlags) filter(c *cobra.Command) idem.ParkedFilter {
	return idem.ParkedFilter{AggregateID: f.aggregate, HasAggregate: c.Flags().Changed("aggregate"), ID: f.id, Limit: f.limit}
}

func (a *app) parkedCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "parked",
		Short: "List, show, replay or discard messages an inbox parked; list the early events it holds",
		Long: `An inbox parks a message whose version gap did not close: after its
retries through the broker, or, where it holds gaps in the store, after
idem.Options.EarlyLimit; and it holds the later messages of the same
aggregate behind it. These commands show the park and put messages back:
replay moves an aggregate's parked messages back to the broker, in order,
with their original IDs and headers and a wary-replayed-by header,
forgetting their inbox claims so that the consumer processes them again.
Before an inbox that holds gaps parks them, "wary parked early" lists the
early events it holds.`,
		Example: `  wary parked list --sqlite shop.db
  wary parked early --sqlite shop.db
  wary parked show 7 --sqlite shop.db
  wary parked replay --consumer billing --aggregate order-3 --to rabbit://orders --postgres "$WARY_POSTGRES_URL"
  wary parked discard --consumer billing --id 7 --yes --sqlite shop.db`,
	}
	c.AddCommand(a.parkedList(), a.parkedEarly(), a.parkedShow(), a.parkedReplay(), a.parkedDiscard())
	return c
}

func (a *app) parkedList() *cobra.Command {
	var f parkedFlags
	c := &cobra.Command{
		Use:   "list [--consumer NAME] [--aggregate ID]",
		Short: "List parked messages (exit 1 if there are any)",
		Example: `  wary parked list --sqlite shop.db
  wary parked list --consumer billing --aggregate order-3 --json --postgres "$WARY_POSTGRES_URL"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			d, err := a.openStore(ctx, &f.store)
			if err != nil {
				return err
			}
			defer d.close()
			out, err := listParked(ctx, d, f.consumer, f.filter(c), false)
			if err != nil {
				return err
			}
			return a.report(out, func(w io.Writer) { printParked(w, out) }, len(out) > 0)
		},
	}
	f.store.add(c)
	c.Flags().StringVar(&f.consumer, "consumer", "", "only this consumer's messages")
	c.Flags().StringVar(&f.aggregate, "aggregate", "", "only this aggregate's messages (\"\" for those without one)")
	c.Flags().IntVar(&f.limit, "limit", 0, "at most this many messages per consumer")
	return c
}

func (a *app) parkedShow() *cobra.Command {
	var f parkedFlags
	c := &cobra.Command{
		Use:   "show ID [--consumer NAME]",
		Short: "Show one parked message with its headers and body",
		Long: `show prints one parked message, with its headers and body, by the ID
that "wary parked list" prints. IDs are unique across consumers, so
--consumer is needed only to check that the message is that consumer's.`,
		Example: `  wary parked show 7 --sqlite shop.db --json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return fmt.Errorf("ID %q is not a parked message's number (see wary parked list)", args[0])
			}
			ctx := c.Context()
			d, err := a.openStore(ctx, &f.store)
			if err != nil {
				return err
			}
			defer d.close()
			cons, p, err := findParked(ctx, d, f.consumer, id)
			if err != nil {
				return err
			}
			j := toParkedJSON(cons, p, true)
			return a.out(j, func(w io.Writer) {
				printParked(w, []parkedJSON{j})
				fmt.Fprintln(w, "headers:")
				for _, k := range slices.Sorted(maps.Keys(j.Headers)) {
					fmt.Fprintf(w, "  %s: %s\n", k, j.Headers[k])
				}
				fmt.Fprintf(w, "body (%s):\n%s\n", j.BodyEncoding, j.Body)
			})
		},
	}
	f.store.add(c)
	c.Flags().StringVar(&f.consumer, "consumer", "", "only if it is this consumer's message")
	return c
}

// findParked returns parked message id and its consumer: consumer's, or,
// with consumer "", whichever consumer's it is (IDs are unique).
func findParked(ctx context.Context, d *db, consumer string, id int64) (string, idem.Parked, error) {
	p, ok, err := d.FindParked(ctx, consumer, id)
	switch {
	case err != nil:
		return "", idem.Parked{}, err
	case !ok && consumer != "":
		return "", idem.Parked{}, fmt.Errorf("consumer %q has no parked message %d (see wary parked list)", consumer, id)
	case !ok:
		return "", idem.Parked{}, fmt.Errorf("no parked message %d (see wary parked list)", id)
	}
	return p.Consumer, p, nil
}

func (a *app) parkedReplay() *cobra.Command {
	var f parkedFlags
	c := &cobra.Command{
		Use:   "replay --consumer NAME (--aggregate ID | --all) --to TOPIC_URL",
		Short: "Move parked messages back to the broker, in order, for the consumer to process again",
		Long: `replay takes each selected aggregate's parked messages out of the park,
in replay order (version, sequence, parking order), forgets their inbox
claims, and publishes them to --to with their original ID, key and
headers plus wary-replayed-by; all in one store transaction per
aggregate, committed only after the broker confirmed every publish. A
message whose gap is still open is parked again when it comes back.

Nothing is lost: a failed publish leaves the messages parked. But a
consumer on PostgreSQL that receives a replayed message before the
replay's transaction commits can hold it again (its claim-and-check
statement still sees the park): run "wary parked list" afterwards, and
replay again if the aggregate is back.`,
		Example: `  wary parked replay --consumer billing --aggregate order-3 --to 'mem://orders' --sqlite shop.db --yes`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !f.all && !c.Flags().Changed("aggregate") {
				return errors.New("choose what to replay: --aggregate ID or --all")
			}
			ctx := c.Context()
			d, err := a.openStore(ctx, &f.store)
			if err != nil {
				return err
			}
			defer d.close()
			aggs, err := d.ParkedAggregates(ctx, f.consumer, f.filter(c))
			if err != nil {
				return err
			}
			if len(aggs) == 0 {
				return a.out(replayJSON{Replayed: []parkedJSON{}}, func(w io.Writer) { fmt.Fprintln(w, "nothing parked to replay") })
			}
			if err := a.confirm(fmt.Sprintf("replay the parked messages of %d aggregate(s) of consumer %q to %s", len(aggs), f.consumer, redact.String(f.to))); err != nil {
				return err
			}
			t, err := a.openTopic(ctx, f.to)
			if err != nil {
				return err
			}
			defer t.Close()
			a.warnDedup(t)
			res, err := replayParked(ctx, d, t, f.consumer, aggs, replayedBy(), nil, nil)
			a.audited(ctx, d, "parked replay", fmt.Sprintf("consumer %q aggregates %s to %s", f.consumer, quoteAll(aggs), redact.String(f.to)), len(res.Replayed))
			if err != nil {
				return err
			}
			return a.out(res, func(w io.Writer) {
				fmt.Fprintf(w, "replayed %d message(s) of %d aggregate(s) to %s\n", len(res.Replayed), len(aggs), redact.String(f.to))
			})
		},
	}
	f.store.add(c)
	a.yesFlag(c)
	c.Flags().StringVar(&f.consumer, "consumer", "", "the consumer (required)")
	c.Flags().StringVar(&f.aggregate, "aggregate", "", "replay this aggregate's messages")
	c.Flags().BoolVar(&f.all, "all", false, "replay every aggregate's messages")
	c.Flags().StringVar(&f.to, "to", "", "topic URL the consumer reads from (required)")
	_ = c.MarkFlagRequired("consumer")
	_ = c.MarkFlagRequired("to")
	return c
}

type replayJSON struct {
	Replayed []parkedJSON `json:"replayed"`
}

func (a *app) parkedDiscard() *cobra.Command {
	var f parkedFlags
	c := &cobra.Command{
		Use:   "discard --consumer NAME (--id N | --aggregate ID | --all)",
		Short: "Delete parked messages for good; their effects are never applied",
		Example: `  wary parked discard --consumer billing --id 7 --sqlite shop.db
  wary parked discard --consumer billing --aggregate order-3 --yes --postgres "$WARY_POSTGRES_URL"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			flt := f.filter(c)
			if !f.all && !flt.HasAggregate && flt.ID == 0 {
				return errors.New("choose what to discard: --id N, --aggregate ID or --all")
			}
			ctx := c.Context()
			d, err := a.openStore(ctx, &f.store)
			if err != nil {
				return err
			}
			defer d.close()
			n, err := d.CountParked(ctx, f.consumer, flt)
			if err != nil {
				return err
			}
			if n > 0 {
				if err := a.confirm(fmt.Sprintf("discard %d parked message(s) of consumer %q for good", n, f.consumer)); err != nil {
					return err
				}
				if n, err = d.DiscardParked(ctx, f.consumer, flt); err != nil {
					return err
				}
				a.audited(ctx, d, "parked discard", fmt.Sprintf("consumer %q %s", f.consumer, describeParkedFilter(flt)), n)
			}
			return a.out(map[string]int{"discarded": n}, func(w io.Writer) { fmt.Fprintf(w, "discarded %d parked message(s)\n", n) })
		},
	}
	f.store.add(c)
	a.yesFlag(c)
	c.Flags().StringVar(&f.consumer, "consumer", "", "the consumer (required)")
	c.Flags().StringVar(&f.aggregate, "aggregate", "", "discard this aggregate's messages")
	c.Flags().Int64Var(&f.id, "id", 0, "discard this parked message")
	c.Flags().BoolVar(&f.all, "all", false, "discard all the consumer's parked messages")
	_ = c.MarkFlagRequired("consumer")
	return c
}

// describeParkedFilter says what a filter selects, for the audit log.
func describeParkedFilter(f idem.ParkedFilter) string {
	switch {
	case f.ID != 0:
		return fmt.Sprintf("parked message %d", f.ID)
	case f.HasAggregate:
		return fmt.Sprintf("aggregate %q", f.AggregateID)
	}
	return "all parked messages"
}

// parkedJSON is a parked message as printed.
type parkedJSON struct {
	ID           int64             `json:"id"`
	Consumer     string            `json:"consumer"`
	MessageID    string            `json:"message_id"`
	AggregateID  string            `json:"aggregate_id"`
	Version      int64             `json:"version"`
	Sequence     int64             `json:"sequence"`
	Key          string            `json:"key"`
	Reason       string            `json:"reason"`
	Attempts     int               `json:"attempts"`
	FirstSeen    time.Time         `json:"first_seen"`
	LastSeen     time.Time         `json:"last_seen"`
	Headers      map[string]string `json:"headers,omitempty"`
	Body         string            `json:"body,omitempty"`
	BodyEncoding string            `json:"body_encoding,omitempty"`
}

func toParkedJSON(consumer string, p idem.Parked, full bool) parkedJSON {
	j := parkedJSON{ID: p.ID, Consumer: consumer, MessageID: p.MessageID, AggregateID: p.AggregateID, Version: p.Version,
		Sequence: p.Sequence, Key: p.Key, Reason: p.Reason, Attempts: p.Attempts, FirstSeen: p.FirstSeen, LastSeen: p.LastSeen}
	if full {
		j.Headers = p.Headers.Map()
		j.Body, j.BodyEncoding = bodyText(p.Body)
	}
	return j
}

// bodyText is the body as text when it is UTF-8, else base64.
func bodyText(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	return base64Std(b), "base64"
}

func printParked(w io.Writer, ps []parkedJSON) {
	if len(ps) == 0 {
		fmt.Fprintln(w, "nothing parked")
		return
	}
	table(w, "ID | CONSUMER | MESSAGE | AGGREGATE | VERSION | SEQ | ATTEMPTS | LAST SEEN | REASON", len(ps), func(i int) []any {
		p := ps[i]
		return []any{p.ID, p.Consumer, p.MessageID, p.AggregateID, p.Version, p.Sequence, p.Attempts, p.LastSeen.Format(time.RFC3339), p.Reason}
	})
}

// warnDedup tells the operator, on stderr, that a topic with a dedup
// window drops a replayed message whose ID it saw within the window.
func (a *app) warnDedup(t *broker.Topic) {
	if w := t.Capabilities().DedupWindow; w > 0 {
		fmt.Fprintf(a.io.Err, "note: this broker drops a message whose ID it saw in the last %s (per %s): a message first published less than %s ago is dropped, not replayed\n",
			w, t.Capabilities().DedupScope, w)
	}
}

// replayedBy says who replays: user@host and the time.
func replayedBy() string {
	return operator() + " " + time.Now().UTC().Format(time.RFC3339)
}

// operator is this process's user@host.
func operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
