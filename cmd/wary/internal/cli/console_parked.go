package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/store"
)

// The console's parked pages and actions.

type aggregateJSON struct {
	Consumer  string       `json:"consumer"`
	Aggregate string       `json:"aggregate"`
	Messages  []parkedJSON `json:"messages"`
}

type parkedPage struct {
	Consumers []consumerParked `json:"consumers"`
	ReplayTo  string           `json:"replay_to"`
}

type consumerParked struct {
	Consumer   string          `json:"consumer"`
	Count      int             `json:"count"`
	Aggregates []aggregateJSON `json:"aggregates"`
}

func (con *console) parked(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	consumer, err := consumerParam(r, false)
	if err != nil {
		return err
	}
	ps, err := listParked(ctx, con.db, consumer, store.ParkedFilter{}, false)
	if err != nil {
		return err
	}
	out := parkedPage{Consumers: []consumerParked{}, ReplayTo: redact(con.replayTo())}
	for _, p := range ps {
		if n := len(out.Consumers); n == 0 || out.Consumers[n-1].Consumer != p.Consumer {
			out.Consumers = append(out.Consumers, consumerParked{Consumer: p.Consumer})
		}
		c := &out.Consumers[len(out.Consumers)-1]
		c.Count++
		if n := len(c.Aggregates); n == 0 || c.Aggregates[n-1].Aggregate != p.AggregateID {
			c.Aggregates = append(c.Aggregates, aggregateJSON{Consumer: p.Consumer, Aggregate: p.AggregateID})
		}
		a := &c.Aggregates[len(c.Aggregates)-1]
		a.Messages = append(a.Messages, p)
	}
	con.render(w, r, "parked", http.StatusOK, out)
	return nil
}

// earlyPage lists the aggregates holding early events (read-only), with
// the early limit the console was given (--early-limit or --config).
type earlyPage struct {
	EarlyLimit string      `json:"early_limit"`
	Aggregates []earlyJSON `json:"aggregates"`
}

func (con *console) early(w http.ResponseWriter, r *http.Request) error {
	consumer, err := consumerParam(r, false)
	if err != nil {
		return err
	}
	limit := con.earlyLimit()
	es, err := listEarly(r.Context(), con.db, consumer, 0, limit)
	if err != nil {
		return err
	}
	con.render(w, r, "early", http.StatusOK, earlyPage{EarlyLimit: limit.String(), Aggregates: es})
	return nil
}

// earlyLimit is the inbox's idem.Options.EarlyLimit as the console was
// told it.
func (con *console) earlyLimit() time.Duration {
	if in := con.pipeline.Inbox; in != nil && in.EarlyLimit > 0 {
		return in.EarlyLimit
	}
	return idem.DefaultEarlyLimit
}

// parkedAggregate shows one aggregate's messages in replay order, with
// their headers; a body only when ?body=ID (or all) asks for it.
func (con *console) parkedAggregate(w http.ResponseWriter, r *http.Request) error {
	consumer, err := consumerParam(r, true)
	if err != nil {
		return err
	}
	agg, err := aggregateParam(r.URL.Query(), "aggregate")
	if err != nil {
		return err
	}
	ps, err := listParked(r.Context(), con.db, consumer, store.ParkedFilter{AggregateID: agg, HasAggregate: true}, true)
	if err != nil {
		return err
	}
	show := r.FormValue("body")
	if id, err := strconv.ParseInt(show, 10, 64); show != "" && show != "all" && (err != nil || id <= 0) {
		return badRequest{fmt.Sprintf("body: %q is not a parked message's number", show)}
	}
	for i := range ps {
		if show != "all" && show != strconv.FormatInt(ps[i].ID, 10) {
			ps[i].Body, ps[i].BodyEncoding = "", ""
		}
	}
	con.render(w, r, "aggregate", http.StatusOK, aggregateJSON{Consumer: consumer, Aggregate: agg, Messages: ps})
	return nil
}

func (con *console) replayTo() string {
	if con.flags.replayTo != "" {
		return con.flags.replayTo
	}
	return con.flags.pipe.broker
}

// selected reads the form's consumer and aggregates, each with its parked
// messages.
func (con *console) selected(r *http.Request) (string, []aggregateJSON, int, error) {
	if err := r.ParseForm(); err != nil {
		return "", nil, 0, badRequest{err.Error()}
	}
	consumer, aggs := r.PostForm.Get("consumer"), r.PostForm["aggregate"]
	if consumer == "" || len(aggs) == 0 {
		return "", nil, 0, badRequest{"choose a consumer and at least one aggregate"}
	}
	if err := checkConsumer(consumer); err != nil {
		return "", nil, 0, err
	}
	for _, agg := range aggs {
		if err := checkAggregate("aggregate", agg); err != nil {
			return "", nil, 0, err
		}
	}
	var out []aggregateJSON
	n := 0
	for _, agg := range aggs {
		ps, err := listParked(r.Context(), con.db, consumer, store.ParkedFilter{AggregateID: agg, HasAggregate: true}, false)
		if err != nil {
			return "", nil, 0, err
		}
		if len(ps) > 0 {
			out = append(out, aggregateJSON{Consumer: consumer, Aggregate: agg, Messages: ps})
			n += len(ps)
		}
	}
	return consumer, out, n, nil
}

type replayPlan struct {
	Consumer   string          `json:"consumer"`
	To         string          `json:"to"`
	Rate       float64         `json:"rate"`
	Aggregates []aggregateJSON `json:"aggregates"`
	Messages   int             `json:"messages"`
	DryRun     bool            `json:"dry_run"`
	Job        int64           `json:"job,omitempty"`
}

// parkedReplay answers a dry run with what would be replayed, and
// otherwise starts the replay as a job, at --rate aggregates a second.
func (con *console) parkedReplay(w http.ResponseWriter, r *http.Request) error {
	consumer, aggs, n, err := con.selected(r)
	if err != nil {
		return err
	}
	rate := 10.0
	if s := r.PostForm.Get("rate"); s != "" {
		if rate, err = strconv.ParseFloat(s, 64); err != nil || !(rate >= 0.01 && rate <= 1000) {
			return badRequest{"rate: want aggregates per second, from 0.01 to 1000"}
		}
	}
	plan := replayPlan{Consumer: consumer, To: redact(con.replayTo()), Rate: rate, Aggregates: aggs, Messages: n, DryRun: r.PostForm.Get("dry_run") != "false"}
	if plan.DryRun || len(aggs) == 0 {
		con.render(w, r, "replay", http.StatusOK, plan)
		return nil
	}
	names := make([]string, len(aggs))
	for i, a := range aggs {
		names[i] = a.Aggregate
	}
	j := con.startJob("replay parked", fmt.Sprintf("consumer %q: %d aggregate(s) to %s", consumer, len(names), plan.To), len(names))
	operator := who(r)
	con.wg.Go(func() {
		ctx := con.ctx
		var res replayJSON
		t, err := con.app.openTopic(ctx, con.replayTo())
		if err == nil {
			tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
			pace := func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-tick.C:
					return nil
				}
			}
			res, err = replayParked(ctx, con.db, t, consumer, names, operator, pace, func(agg string, ps []parkedJSON) {
				j.step(fmt.Sprintf("aggregate %q: %d message(s) replayed", agg, len(ps)))
			})
			tick.Stop()
			_ = t.Close()
		}
		con.finish(j, operator, "parked replay", fmt.Sprintf("consumer %q aggregates %s to %s", consumer, quoteAll(names), plan.To), len(res.Replayed), res, err)
	})
	plan.Job = j.ID
	con.done(w, r, fmt.Sprintf("/jobs/%d", j.ID), plan)
	return nil
}

// parkedDiscard asks first, naming what goes; then discards.
func (con *console) parkedDiscard(w http.ResponseWriter, r *http.Request) error {
	consumer, aggs, n, err := con.selected(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		var items []string
		for _, a := range aggs {
			for _, m := range a.Messages {
				items = append(items, fmt.Sprintf("%s (aggregate %q, version %d)", m.MessageID, a.Aggregate, m.Version))
			}
		}
		con.confirm(w, r, fmt.Sprintf("Discard %d parked message(s) of consumer %q for good? Their effects are never applied.", n, consumer), items)
		return nil
	}
	total := 0
	var names []string
	for _, a := range aggs {
		k, err := con.db.DiscardParked(r.Context(), consumer, store.ParkedFilter{AggregateID: a.Aggregate, HasAggregate: true})
		total += k
		names = append(names, a.Aggregate)
		if err != nil {
			return errors.Join(err, con.audit.record(r.Context(), auditEntry{Who: who(r), Action: "parked discard", What: fmt.Sprintf("consumer %q aggregates %s", consumer, quoteAll(names)), Count: total, Detail: redactErr(err)}))
		}
	}
	if err := con.audit.record(r.Context(), auditEntry{Who: who(r), Action: "parked discard", What: fmt.Sprintf("consumer %q aggregates %s", consumer, quoteAll(names)), Count: total}); err != nil {
		return err
	}
	con.done(w, r, "/parked", map[string]int{"discarded": total})
	return nil
}

type confirmPage struct {
	Question string
	Items    []string
	Action   string
	Fields   [][2]string
}

// confirm renders a page that names what an action changes, with a
// button that sends the same form again with confirm=yes.
func (con *console) confirm(w http.ResponseWriter, r *http.Request, q string, items []string) {
	if api(r) {
		con.render(w, r, "", http.StatusConflict, map[string]any{"confirm": q, "items": items, "hint": "send again with confirm=yes"})
		return
	}
	var fields [][2]string
	for k, vs := range r.PostForm {
		if k == "csrf" || k == "confirm" {
			continue
		}
		for _, v := range vs {
			fields = append(fields, [2]string{k, v})
		}
	}
	slices.SortFunc(fields, func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) })
	con.render(w, r, "confirm", http.StatusOK, confirmPage{Question: q, Items: items, Action: r.URL.Path, Fields: fields})
}
