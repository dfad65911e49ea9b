package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/admin"
)

// The console's parked pages and actions.

type aggregateJSON struct {
	Consumer  string       `json:"consumer"`
	Aggregate string       `json:"aggregate"`
	Messages  []parkedJSON `json:"messages"`
	// More: the aggregate has more messages than the page shows.
	More bool `json:"more,omitempty"`
}

type parkedPage struct {
	Consumers []consumerParked `json:"consumers"`
	ReplayTo  string           `json:"replay_to"`
}

type consumerParked struct {
	Consumer   string          `json:"consumer"`
	Count      int             `json:"count"`
	Aggregates []aggregateJSON `json:"aggregates"`
	// More: the consumer has aggregates after this page's; Next is the
	// cursor that lists them (?consumer=C&after=Next).
	More bool   `json:"more,omitempty"`
	Next string `json:"next"`
}

// pageSize caps the messages, rows or aggregates a console listing reads
// per consumer and request: listings read no bodies, and so a request's
// memory does not grow with the park, the outbox or the messages' size.
const pageSize = 200

// parked lists each consumer's parked messages by aggregate, a page at a
// time (?consumer=C&after=AGGREGATE pages through one consumer's), without
// their bodies.
func (con *console) parked(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	consumer, err := consumerParam(r, false)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	flt := idem.ParkedFilter{Limit: pageSize + 1, NoBody: true}
	if q.Has("after") {
		if consumer == "" {
			return badRequest{"after: give the consumer too"}
		}
		if flt.AfterAggregate, err = aggregateParam(q, "after"); err != nil {
			return err
		}
		flt.HasAfter = true
	}
	counts, err := con.db.ParkedConsumers(ctx)
	if err != nil {
		return err
	}
	consumers := slices.Sorted(maps.Keys(counts))
	if consumer != "" {
		consumers = []string{consumer}
	}
	out := parkedPage{Consumers: []consumerParked{}, ReplayTo: redactText(con.replayTo())}
	for _, cons := range consumers {
		ps, err := listParked(ctx, con.db, cons, flt, false)
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			continue
		}
		c := consumerParked{Consumer: cons, Count: counts[cons]}
		cut := len(ps) > pageSize
		// split: the page ends inside its last aggregate.
		split := cut && ps[pageSize].AggregateID == ps[pageSize-1].AggregateID
		if cut {
			ps = ps[:pageSize]
		}
		for _, p := range ps {
			if n := len(c.Aggregates); n == 0 || c.Aggregates[n-1].Aggregate != p.AggregateID {
				c.Aggregates = append(c.Aggregates, aggregateJSON{Consumer: cons, Aggregate: p.AggregateID})
			}
			a := &c.Aggregates[len(c.Aggregates)-1]
			a.Messages = append(a.Messages, p)
		}
		if cut {
			// A page that ends inside its last aggregate leaves that one
			// to the next page, unless it is the only one (then its first
			// messages show, and its own page has the rest).
			c.More = true
			switch {
			case !split: // it ends with a whole aggregate
			case len(c.Aggregates) > 1:
				c.Aggregates = c.Aggregates[:len(c.Aggregates)-1]
			default:
				c.Aggregates[0].More = true
				after := idem.ParkedFilter{AfterAggregate: c.Aggregates[0].Aggregate, HasAfter: true, Limit: 1, NoBody: true}
				next, err := con.db.Parked(ctx, cons, after)
				if err != nil {
					return err
				}
				c.More = len(next) > 0
			}
			if c.More {
				c.Next = c.Aggregates[len(c.Aggregates)-1].Aggregate
			}
		}
		out.Consumers = append(out.Consumers, c)
	}
	con.render(w, r, "parked", http.StatusOK, out)
	return nil
}

// earlyPage lists the aggregates holding early events (read-only), with
// the early limit the console was given (--early-limit or --config).
type earlyPage struct {
	EarlyLimit string      `json:"early_limit"`
	Aggregates []earlyJSON `json:"aggregates"`
	// More: more aggregates hold early events than the page shows (the
	// oldest holds show).
	More bool `json:"more,omitempty"`
}

func (con *console) early(w http.ResponseWriter, r *http.Request) error {
	consumer, err := consumerParam(r, false)
	if err != nil {
		return err
	}
	limit := con.earlyLimit()
	es, err := listEarly(r.Context(), con.db, consumer, pageSize+1, limit)
	if err != nil {
		return err
	}
	page := earlyPage{EarlyLimit: limit.String(), Aggregates: es}
	if len(es) > pageSize {
		page.Aggregates, page.More = es[:pageSize], true
	}
	con.render(w, r, "early", http.StatusOK, page)
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
// their headers, a page of them; the body only of the one ?body=ID asks
// for.
func (con *console) parkedAggregate(w http.ResponseWriter, r *http.Request) error {
	consumer, err := consumerParam(r, true)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	agg, err := aggregateParam(q, "aggregate")
	if err != nil {
		return err
	}
	var show int64
	if s := q.Get("body"); s != "" {
		if show, err = strconv.ParseInt(s, 10, 64); err != nil || show <= 0 {
			return badRequest{fmt.Sprintf("body: %q is not a parked message's number", s)}
		}
	}
	flt := idem.ParkedFilter{AggregateID: agg, HasAggregate: true, Limit: pageSize + 1, NoBody: true}
	ps, err := listParked(r.Context(), con.db, consumer, flt, true)
	if err != nil {
		return err
	}
	out := aggregateJSON{Consumer: consumer, Aggregate: agg, Messages: ps}
	if len(ps) > pageSize {
		out.Messages, out.More = ps[:pageSize], true
	}
	for i := range out.Messages {
		out.Messages[i].Body, out.Messages[i].BodyEncoding = "", "" // not read
	}
	if show != 0 {
		flt.ID, flt.NoBody, flt.Limit = show, false, 0
		one, err := listParked(r.Context(), con.db, consumer, flt, true)
		if err != nil {
			return err
		}
		for i := range out.Messages {
			if len(one) == 1 && out.Messages[i].ID == show {
				out.Messages[i].Body, out.Messages[i].BodyEncoding = one[0].Body, one[0].BodyEncoding
			}
		}
	}
	con.render(w, r, "aggregate", http.StatusOK, out)
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
		ps, err := listParked(r.Context(), con.db, consumer, idem.ParkedFilter{AggregateID: agg, HasAggregate: true, NoBody: true}, false)
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
	plan := replayPlan{Consumer: consumer, To: redactText(con.replayTo()), Rate: rate, Aggregates: aggs, Messages: n, DryRun: r.PostForm.Get("dry_run") != "false"}
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
		k, err := con.db.DiscardParked(r.Context(), consumer, idem.ParkedFilter{AggregateID: a.Aggregate, HasAggregate: true})
		total += k
		names = append(names, a.Aggregate)
		if err != nil {
			return errors.Join(err, con.record(r.Context(), admin.AuditEntry{Who: who(r), Action: "parked discard", What: fmt.Sprintf("consumer %q aggregates %s", consumer, quoteAll(names)), Count: total, Detail: redactErr(err)}))
		}
	}
	if err := con.record(r.Context(), admin.AuditEntry{Who: who(r), Action: "parked discard", What: fmt.Sprintf("consumer %q aggregates %s", consumer, quoteAll(names)), Count: total}); err != nil {
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
