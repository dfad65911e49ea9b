package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/store"
)

var pageNames = []string{"login", "dashboard", "parked", "aggregate", "replay", "confirm", "outbox", "dead-letters", "probe", "job", "audit", "error"}

func fsSub(f fs.FS, dir string) (fs.FS, error) { return fs.Sub(f, dir) }

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"redact": redact,
		"when":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return time.Since(t).Round(time.Second).String() + " ago"
		},
		"chart": chart,
		// probeHeader is what wary probe prints before its table: what was
		// read of the entity, and the scratch entities' settings.
		"probeHeader": func(res probeJSON) string {
			var b strings.Builder
			printProbeHeader(&b, res)
			return b.String()
		},
		"join": strings.Join,
	}
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		t, err := template.New(n).Funcs(funcs).ParseFS(webFS, "web/layout.html", "web/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("console page %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}

// page is what every template gets.
type page struct {
	Name     string
	CSRF     string
	ReadOnly bool
	Data     any
}

// api reports whether r asked for JSON (a path under /api/).
func api(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// render writes data as the page name, or as JSON for the API.
func (con *console) render(w http.ResponseWriter, r *http.Request, name string, status int, data any) {
	if api(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(data)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := con.pages[name].ExecuteTemplate(w, "layout", page{Name: name, CSRF: con.csrf, ReadOnly: con.flags.readOnly, Data: data}); err != nil {
		con.log.Error("render", "page", name, "err", err)
	}
}

// badRequest is an error in what the operator asked.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// wrap renders h's error as a page (or JSON), without any secret.
func (con *console) wrap(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		status := http.StatusInternalServerError
		if errors.As(err, new(badRequest)) {
			status = http.StatusBadRequest
		}
		con.render(w, r, "error", status, map[string]string{"error": redactErr(err)})
	}
}

// done answers a finished action: JSON for the API, else a redirect.
func (con *console) done(w http.ResponseWriter, r *http.Request, to string, v any) {
	if api(r) {
		con.render(w, r, "", http.StatusOK, v)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

type deadCount struct {
	Source string `json:"source"`
	Count  int    `json:"count"`
	More   bool   `json:"more,omitempty"`
	Error  string `json:"error,omitempty"`
}

type dashboardJSON struct {
	Statement      *guarantee.Statement `json:"statement,omitempty"`
	StatementError string               `json:"statement_error,omitempty"`
	Outbox         healthJSON           `json:"outbox"`
	Parked         map[string]int       `json:"parked"`
	DeadLetters    []deadCount          `json:"dead_letters"`
	UnresolvedKeys map[string]int       `json:"unresolved_keys"`
	Samples        []sample             `json:"samples"`
}

func (con *console) dashboard(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var j dashboardJSON
	st, err := con.app.explain(ctx, &con.flags.pipe, con.pipeline, con.db)
	if err != nil {
		j.StatementError = redactErr(err)
	} else {
		j.Statement = &st
	}
	if j.Outbox, err = outboxHealth(ctx, con.db); err != nil {
		return err
	}
	if j.Parked, err = con.db.ParkedConsumers(ctx); err != nil {
		return err
	}
	j.UnresolvedKeys = map[string]int{}
	for _, k := range con.pipeline.Keys {
		ks, err := con.db.ListKeys(ctx, store.KeyFilter{Provider: k.Provider, Unresolved: true, At: time.Now()})
		if err != nil {
			return err
		}
		j.UnresolvedKeys[k.Provider] = len(ks)
	}
	for _, src := range con.deadSources() {
		dc := deadCount{Source: redact(src)}
		ds, err := con.readDeadLetters(r, src)
		if err != nil {
			dc.Error = redactErr(err)
		}
		dc.Count, dc.More = len(ds), len(ds) >= deadLimit
		j.DeadLetters = append(j.DeadLetters, dc)
	}
	con.mu.Lock()
	j.Samples = slices.Clone(con.samples)
	con.mu.Unlock()
	con.render(w, r, "dashboard", http.StatusOK, j)
	return nil
}

// chart draws the samples of the last hour as an inline SVG line: the x
// axis spans from the first sample (at most an hour ago) to now.
func chart(ss []sample, what string) template.HTML {
	const wd, ht = 320.0, 60.0
	top := 1.0
	val := func(s sample) float64 {
		if what == "age" {
			return s.AgeSec
		}
		return float64(s.Backlog)
	}
	for _, s := range ss {
		top = max(top, val(s))
	}
	now := time.Now()
	span := time.Minute
	if len(ss) > 0 {
		span = max(span, min(time.Hour, now.Sub(ss[0].At)))
	}
	var pts []string
	for _, s := range ss {
		x := wd - now.Sub(s.At).Seconds()/span.Seconds()*wd
		y := ht - val(s)/top*(ht-16) - 2
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	last := "no samples yet"
	if len(ss) > 0 {
		last = strconv.FormatFloat(val(ss[len(ss)-1]), 'f', 0, 64)
	}
	return template.HTML(fmt.Sprintf(`<svg class="chart" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s over the last %s, max %.0f, now %s">`+
		`<rect width="100%%" height="100%%" class="bg"/><polyline points="%s"/><text x="4" y="11">max %.0f · last %s · %d samples</text></svg>`,
		wd, ht, wd, ht, what, span.Round(time.Second), top, last, strings.Join(pts, " "), top, span.Round(time.Second), len(ss)))
}

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
	ps, err := listParked(ctx, con.db, r.FormValue("consumer"), store.ParkedFilter{}, false)
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

// parkedAggregate shows one aggregate's messages in replay order, with
// their headers; a body only when ?body=ID (or all) asks for it.
func (con *console) parkedAggregate(w http.ResponseWriter, r *http.Request) error {
	consumer, agg := r.FormValue("consumer"), r.FormValue("aggregate")
	ps, err := listParked(r.Context(), con.db, consumer, store.ParkedFilter{AggregateID: agg, HasAggregate: true}, true)
	if err != nil {
		return err
	}
	show := r.FormValue("body")
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
		con.finish(j, operator, "parked replay", fmt.Sprintf("consumer %q aggregates %s to %s", consumer, strings.Join(names, ", "), plan.To), len(res.Replayed), res, err)
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
			return errors.Join(err, con.audit.record(r.Context(), auditEntry{Who: who(r), Action: "parked discard", What: fmt.Sprintf("consumer %q aggregates %s", consumer, strings.Join(names, ", ")), Count: total, Detail: redactErr(err)}))
		}
	}
	if err := con.audit.record(r.Context(), auditEntry{Who: who(r), Action: "parked discard", What: fmt.Sprintf("consumer %q aggregates %s", consumer, strings.Join(names, ", ")), Count: total}); err != nil {
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

func (con *console) outbox(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	h, err := outboxHealth(ctx, con.db)
	if err != nil {
		return err
	}
	rows, err := listOutbox(ctx, con.db, store.OutboxFilter{States: []store.OutboxState{store.OutboxQuarantined}, Limit: 500})
	if err != nil {
		return err
	}
	con.render(w, r, "outbox", http.StatusOK, map[string]any{"health": h, "quarantined": rows})
	return nil
}

func (con *console) outboxSet(w http.ResponseWriter, r *http.Request) error {
	verb := r.PathValue("verb")
	to := map[string]store.OutboxState{"requeue": store.OutboxPending, "discard": store.OutboxDiscarded}
	st, ok := to[verb]
	if !ok {
		return badRequest{"want /outbox/requeue or /outbox/discard"}
	}
	if err := r.ParseForm(); err != nil {
		return badRequest{err.Error()}
	}
	var ids []int64
	for _, s := range r.PostForm["row"] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return badRequest{fmt.Sprintf("%q is not an outbox row ID", s)}
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return badRequest{"choose at least one row"}
	}
	if verb == "discard" && r.PostForm.Get("confirm") != "yes" {
		items := make([]string, len(ids))
		for i, id := range ids {
			items[i] = fmt.Sprintf("outbox row %d", id)
		}
		con.confirm(w, r, fmt.Sprintf("Discard %d outbox row(s)? They are never published; their aggregates move on.", len(ids)), items)
		return nil
	}
	done, skipped, err := setOutbox(r.Context(), con.db, ids, st)
	entry := auditEntry{Who: who(r), Action: "outbox " + verb, What: fmt.Sprintf("rows %v", ids), Count: len(done)}
	if len(skipped) > 0 {
		entry.Detail = fmt.Sprintf("skipped %v (gone, or not in a state %s applies to)", skipped, verb)
	}
	if err != nil {
		entry.Detail = redactErr(err)
	}
	if aerr := con.audit.record(r.Context(), entry); err != nil || aerr != nil {
		return errors.Join(err, aerr)
	}
	con.done(w, r, "/outbox", map[string][]int64{"done": done, "skipped": skipped})
	return nil
}

// deadLimit caps the dead letters read per source per page.
const deadLimit = 100

func (con *console) deadSources() []string {
	if len(con.flags.deadLetterSources) > 0 {
		return con.flags.deadLetterSources
	}
	return []string{con.flags.pipe.sub}
}

func (con *console) deadTo() string {
	if con.flags.dlqTo != "" {
		return con.flags.dlqTo
	}
	return con.flags.pipe.broker
}

func (con *console) readDeadLetters(r *http.Request, src string) ([]deadJSON, error) {
	s, err := con.app.openDeadLetters(r.Context(), src)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return listDead(r.Context(), s, &dlqFlags{limit: deadLimit, wait: time.Second})
}

type deadSourceJSON struct {
	Index    int          `json:"index"`
	Source   string       `json:"source"`
	Error    string       `json:"error,omitempty"`
	ByReason []deadReason `json:"by_reason"`
}

type deadReason struct {
	Reason  string     `json:"reason"`
	Letters []deadJSON `json:"letters"`
}

func (con *console) deadLetters(w http.ResponseWriter, r *http.Request) error {
	var out []deadSourceJSON
	for i, src := range con.deadSources() {
		ds, err := con.readDeadLetters(r, src)
		j := deadSourceJSON{Index: i, Source: redact(src), ByReason: []deadReason{}}
		if err != nil {
			j.Error = redactErr(err)
		}
		for _, d := range ds {
			d.Body, d.Encoding = "", ""
			k := slices.IndexFunc(j.ByReason, func(g deadReason) bool { return g.Reason == d.Reason })
			if k < 0 {
				j.ByReason, k = append(j.ByReason, deadReason{Reason: d.Reason}), len(j.ByReason)
			}
			j.ByReason[k].Letters = append(j.ByReason[k].Letters, d)
		}
		out = append(out, j)
	}
	con.render(w, r, "dead-letters", http.StatusOK, map[string]any{"sources": out, "to": redact(con.deadTo())})
	return nil
}

func (con *console) deadLettersMove(w http.ResponseWriter, r *http.Request) error {
	verb := r.PathValue("verb")
	if verb != "replay" && verb != "discard" {
		return badRequest{"want /dead-letters/replay or /dead-letters/discard"}
	}
	if err := r.ParseForm(); err != nil {
		return badRequest{err.Error()}
	}
	srcs := con.deadSources()
	i, err := strconv.Atoi(r.PostForm.Get("source"))
	if err != nil || i < 0 || i >= len(srcs) {
		return badRequest{"source: want the index of a dead-letter source"}
	}
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		return badRequest{"choose at least one dead letter"}
	}
	if verb == "discard" && r.PostForm.Get("confirm") != "yes" {
		con.confirm(w, r, fmt.Sprintf("Remove %d dead letter(s) of %s for good?", len(ids), redact(srcs[i])), ids)
		return nil
	}
	ctx := r.Context()
	s, err := con.app.openDeadLetters(ctx, srcs[i])
	if err != nil {
		return err
	}
	defer s.Close()
	var t *broker.Topic
	what := fmt.Sprintf("%s of %s", strings.Join(ids, ", "), redact(srcs[i]))
	if verb == "replay" {
		if t, err = con.app.openTopic(ctx, con.deadTo()); err != nil {
			return err
		}
		defer t.Close()
		what += " to " + redact(con.deadTo())
	}
	done, missing, err := moveDead(ctx, s, t, &dlqFlags{limit: deadLimit, wait: time.Second, ids: ids}, func(int) error { return nil })
	entry := auditEntry{Who: who(r), Action: "dead letters " + verb, What: what, Count: len(done)}
	if len(missing) > 0 {
		entry.Detail = fmt.Sprintf("not found: %v", missing)
	}
	if err != nil {
		entry.Detail = redactErr(err)
	}
	if aerr := con.audit.record(ctx, entry); err != nil || aerr != nil {
		return errors.Join(err, aerr)
	}
	con.done(w, r, "/dead-letters", map[string]any{verb + "ed": len(done), "not_found": missing})
	return nil
}

func (con *console) auditPage(w http.ResponseWriter, r *http.Request) error {
	es, err := con.audit.list(r.Context(), 200)
	if err != nil {
		return err
	}
	con.render(w, r, "audit", http.StatusOK, es)
	return nil
}
