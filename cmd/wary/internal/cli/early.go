package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/idem"
)

// earlyJSON is an aggregate whose early events an inbox holds in the
// store, waiting for their predecessor, as wary parked early prints it
// and the console's early page shows it.
type earlyJSON struct {
	Consumer    string `json:"consumer"`
	AggregateID string `json:"aggregate_id"`
	// Awaited is the version the aggregate awaited when its latest early
	// event was held (0: not recorded, held before the store kept it).
	Awaited      int64     `json:"awaited"`
	FirstVersion int64     `json:"first_version"`
	LastVersion  int64     `json:"last_version"`
	Held         int       `json:"held"`
	OldestHeldAt time.Time `json:"oldest_held_at"`
	OldestAge    string    `json:"oldest_age"`
	// ParksAt is when the inbox parks the aggregate if the awaited
	// event has not come: the oldest hold plus the early limit. Overdue:
	// that time has passed (the inbox parks it when it next handles a
	// delivery or runs Inbox.ExpireEarly).
	ParksAt time.Time `json:"parks_at"`
	Overdue bool      `json:"overdue"`
}

// listEarly lists the aggregates holding early events, of consumer or
// (consumer "") of every consumer, oldest hold first, at most limit (0:
// all), with when each is parked under earlyLimit.
func listEarly(ctx context.Context, d *db, consumer string, limit int, earlyLimit time.Duration) ([]earlyJSON, error) {
	es, err := d.Early(ctx, consumer, limit)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]earlyJSON, 0, len(es))
	for _, e := range es {
		parks := e.OldestHeldAt.Add(earlyLimit)
		out = append(out, earlyJSON{Consumer: e.Consumer, AggregateID: e.AggregateID, Awaited: e.Awaited, FirstVersion: e.FirstVersion,
			LastVersion: e.LastVersion, Held: e.Held, OldestHeldAt: e.OldestHeldAt, OldestAge: now.Sub(e.OldestHeldAt).Round(time.Second).String(),
			ParksAt: parks, Overdue: !now.Before(parks)})
	}
	return out, nil
}

// earlyLimitFlag is --early-limit: the inbox's idem.Options.EarlyLimit.
func earlyLimitFlag(c *cobra.Command, v *time.Duration) {
	c.Flags().DurationVar(v, "early-limit", idem.DefaultEarlyLimit, "how long the inbox holds a gap before it parks the aggregate (its idem.Options.EarlyLimit)")
}

func (a *app) parkedEarly() *cobra.Command {
	var f parkedFlags
	var earlyLimit time.Duration
	c := &cobra.Command{
		Use:   "early [--consumer NAME] [--early-limit D]",
		Short: "List the aggregates whose early events an inbox holds, before they are parked (exit 1 if a hold is overdue)",
		Long: `early lists the aggregates for which an inbox holds early events in the
store (idem.Options.Gaps): versioned events that arrived before their
predecessor, acked on the broker and waiting in the store's early table,
one row per event. For each: the consumer, the aggregate, the version it
awaits (as recorded when its latest early event was held), how many
events are held and their versions, the age of the oldest, and when the
inbox parks them if the awaited event does not come: the oldest hold plus
--early-limit, which must be the inbox's idem.Options.EarlyLimit (default
1h). Read-only. A held event applied or parked leaves the list; parked
ones are in "wary parked list". Exit 1 only if a hold is overdue (older
than --early-limit: the inbox parks it when it next handles a delivery, or
Inbox.ExpireEarly does).`,
		Example: `  wary parked early --sqlite shop.db
  wary parked early --consumer billing --early-limit 30m --json --postgres "$WARY_POSTGRES_URL"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if earlyLimit <= 0 {
				return fmt.Errorf("--early-limit %s: want a positive duration", earlyLimit)
			}
			ctx := c.Context()
			d, err := a.openStore(ctx, &f.store)
			if err != nil {
				return err
			}
			defer d.close()
			out, err := listEarly(ctx, d, f.consumer, f.limit, earlyLimit)
			if err != nil {
				return err
			}
			overdue := false
			for _, e := range out {
				overdue = overdue || e.Overdue
			}
			return a.report(out, func(w io.Writer) { printEarly(w, out) }, overdue)
		},
	}
	f.store.add(c)
	c.Flags().StringVar(&f.consumer, "consumer", "", "only this consumer's aggregates")
	c.Flags().IntVar(&f.limit, "limit", 0, "at most this many aggregates, oldest hold first")
	earlyLimitFlag(c, &earlyLimit)
	return c
}

func printEarly(w io.Writer, es []earlyJSON) {
	if len(es) == 0 {
		fmt.Fprintln(w, "no early events held")
		return
	}
	table(w, "CONSUMER | AGGREGATE | AWAITS | HELD | VERSIONS | OLDEST HELD | PARKED AT", len(es), func(i int) []any {
		e := es[i]
		awaits, parks := "?", e.ParksAt.UTC().Format(time.RFC3339)
		if e.Awaited > 0 {
			awaits = fmt.Sprintf("v%d", e.Awaited)
		}
		if e.Overdue {
			parks += " (overdue)"
		}
		return []any{e.Consumer, e.AggregateID, awaits, e.Held, fmt.Sprintf("v%d-v%d", e.FirstVersion, e.LastVersion), e.OldestAge + " ago", parks}
	})
}
