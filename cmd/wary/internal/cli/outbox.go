package cli

import (
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/idem/outbox"
)

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (a *app) outboxCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "outbox",
		Short: "Show the outbox backlog, list rows, requeue or discard quarantined rows",
		Long: `The relay publishes committed outbox rows; a row that failed too often, or
can never be published, is quarantined and blocks the later rows of its
aggregate until it is requeued (tried again from attempt 0) or discarded
(never published; its aggregate moves on).`,
		Example: `  wary outbox status --postgres "$WARY_POSTGRES_URL"
  wary outbox list --state quarantined --sqlite shop.db
  wary outbox requeue 42 --sqlite shop.db --yes`,
	}
	c.AddCommand(a.outboxStatus(), a.outboxList(), a.outboxSet("requeue", outbox.Pending), a.outboxSet("discard", outbox.Discarded))
	return c
}

type healthJSON struct {
	Backlog         int64         `json:"backlog"`
	Retrying        int64         `json:"retrying"`
	Quarantined     int64         `json:"quarantined"`
	OldestUnsent    time.Time     `json:"oldest_unsent,omitzero"`
	OldestUnsentAge string        `json:"oldest_unsent_age,omitempty"`
	Stream          *streamJSON   `json:"stream,omitempty"`
	oldestAge       time.Duration // for the text views
}

// streamJSON is the outbox stream's slot (a relay on a store with postgres.SourceOptions.Stream).
type streamJSON struct {
	Slot      string `json:"slot"`
	Active    bool   `json:"active"`
	LagBytes  int64  `json:"lag_bytes"`
	LagAge    string `json:"lag_age"`
	WALStatus string `json:"wal_status"`
	// Released counts the slots dropped over the WAL budget
	// (postgres.SourceOptions.WALBudget), the last at ReleasedAt, when it
	// retained ReleasedLag bytes.
	Released    int64     `json:"released,omitempty"`
	ReleasedAt  time.Time `json:"released_at,omitzero"`
	ReleasedLag int64     `json:"released_lag_bytes,omitempty"`
	exists      bool
}

// String is the slot's line in wary outbox status and wary explain.
func (s *streamJSON) String() string {
	var line string
	if s.exists {
		active := "no relay streams"
		if s.Active {
			active = "a relay streams"
		}
		line = fmt.Sprintf("stream slot %s: %s; lag %d bytes, %s; WAL %s", s.Slot, active, s.LagBytes, s.LagAge, s.WALStatus)
	} else {
		line = fmt.Sprintf("stream slot %s: missing (the relay polls, then creates it)", s.Slot)
	}
	if s.Released > 0 {
		line += fmt.Sprintf("; released over the WAL budget %d times, last at %s (%d bytes retained)",
			s.Released, s.ReleasedAt.Format(time.RFC3339), s.ReleasedLag)
	}
	return line
}

func (a *app) outboxStatus() *cobra.Command {
	var sf storeFlags
	c := &cobra.Command{
		Use:     "status",
		Short:   "Show the backlog, the oldest unsent row's age and the quarantined count (exit 1 if any row is quarantined)",
		Example: `  wary outbox status --postgres "$WARY_POSTGRES_URL" --json`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			d, err := a.openStore(ctx, &sf)
			if err != nil {
				return err
			}
			defer d.close()
			j, err := outboxHealth(ctx, d)
			if err != nil {
				return err
			}
			return a.report(j, func(w io.Writer) {
				fmt.Fprintf(w, "backlog %d (retrying %d), quarantined %d, oldest unsent %s\n", j.Backlog, j.Retrying, j.Quarantined, age(j.oldestAge, j.OldestUnsent))
				if s := j.Stream; s != nil {
					fmt.Fprintln(w, s)
				}
			}, j.Quarantined > 0)
		},
	}
	sf.add(c)
	return c
}

type outboxJSON struct {
	RowID       int64     `json:"row_id"`
	MessageID   string    `json:"message_id"`
	AggregateID string    `json:"aggregate_id"`
	Sequence    int64     `json:"sequence"`
	Version     int64     `json:"version"`
	Type        string    `json:"type"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	CreatedAt   time.Time `json:"created_at"`
	LastError   string    `json:"last_error,omitempty"`
}

func parseStates(s string) ([]outbox.State, error) {
	if s == "" {
		return nil, nil
	}
	var out []outbox.State
	for _, name := range strings.Split(s, ",") {
		found := false
		for st := outbox.Pending; st <= outbox.Discarded; st++ {
			if st.String() == strings.TrimSpace(name) {
				out, found = append(out, st), true
			}
		}
		if !found {
			return nil, fmt.Errorf("--state %q: want pending, sent, quarantined or discarded", name)
		}
	}
	return out, nil
}

func (a *app) outboxList() *cobra.Command {
	var (
		sf                storeFlags
		states, aggregate string
		limit             int
	)
	c := &cobra.Command{
		Use:   "list [--state STATES] [--aggregate ID]",
		Short: "List outbox rows with their state, attempts and last error",
		Example: `  wary outbox list --state quarantined --sqlite shop.db
  wary outbox list --aggregate order-3 --state pending,quarantined --json --postgres "$WARY_POSTGRES_URL"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ss, err := parseStates(states)
			if err != nil {
				return err
			}
			ctx := c.Context()
			d, err := a.openStore(ctx, &sf)
			if err != nil {
				return err
			}
			defer d.close()
			out, err := listOutbox(ctx, d, outbox.Filter{States: ss, AggregateID: aggregate, Limit: limit})
			if err != nil {
				return err
			}
			return a.out(out, func(w io.Writer) {
				if len(out) == 0 {
					fmt.Fprintln(w, "no rows")
					return
				}
				table(w, "ROW | MESSAGE | AGGREGATE | SEQ | STATE | ATTEMPTS | CREATED | LAST ERROR", len(out), func(i int) []any {
					r := out[i]
					return []any{r.RowID, r.MessageID, r.AggregateID, r.Sequence, r.State, r.Attempts, r.CreatedAt.Format(time.RFC3339), r.LastError}
				})
			})
		},
	}
	sf.add(c)
	c.Flags().StringVar(&states, "state", "", "comma-separated states: pending, sent, quarantined, discarded")
	c.Flags().StringVar(&aggregate, "aggregate", "", "only this aggregate's rows")
	c.Flags().IntVar(&limit, "limit", 100, "at most this many rows (0: all)")
	return c
}

// outboxSet is requeue (quarantined to pending) or discard (pending or
// quarantined to discarded).
func (a *app) outboxSet(verb string, to outbox.State) *cobra.Command {
	var sf storeFlags
	short := "Requeue quarantined rows: the relay tries them again from attempt 0"
	if to == outbox.Discarded {
		short = "Discard pending or quarantined rows: never published; their aggregate moves on"
	}
	c := &cobra.Command{
		Use:     verb + " ROW_ID...",
		Short:   short,
		Example: fmt.Sprintf("  wary outbox %s 42 43 --sqlite shop.db --yes", verb),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ids := make([]int64, len(args))
			for i, s := range args {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%q is not an outbox row ID (see wary outbox list)", s)
				}
				ids[i] = id
			}
			ctx := c.Context()
			d, err := a.openStore(ctx, &sf)
			if err != nil {
				return err
			}
			defer d.close()
			if err := a.confirm(fmt.Sprintf("%s %d outbox row(s)", verb, len(ids))); err != nil {
				return err
			}
			done, skipped, err := setOutbox(ctx, d, ids, to)
			a.audited(ctx, d, "outbox "+verb, fmt.Sprintf("rows %v", ids), len(done))
			if err != nil {
				return err
			}
			past := strings.TrimSuffix(verb, "e") + "ed"
			res := map[string][]int64{past: done, "skipped": skipped}
			return a.report(res, func(w io.Writer) {
				fmt.Fprintf(w, "%s %d row(s)", past, len(done))
				if len(skipped) > 0 {
					fmt.Fprintf(w, "; skipped %v (no such row, or not in a state %s applies to)", skipped, verb)
				}
				fmt.Fprintln(w)
			}, len(skipped) > 0)
		},
	}
	sf.add(c)
	a.yesFlag(c)
	return c
}
