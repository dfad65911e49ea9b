package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/admin"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/outbox"
)

var pageNames = []string{"login", "dashboard", "parked", "early", "aggregate", "replay", "confirm", "outbox", "dead-letters", "probe", "job", "audit", "error"}

func fsSub(f fs.FS, dir string) (fs.FS, error) { return fs.Sub(f, dir) }

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"redact": redactText,
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
	Early          map[string]int       `json:"early"`
	DeadLetters    []deadCount          `json:"dead_letters"`
	UnresolvedKeys map[string]int       `json:"unresolved_keys"`
	Samples        []sample             `json:"samples"`
}

func (con *console) dashboard(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var j dashboardJSON
	// Each source's dead letters are looked at once: the statement's
	// "now:" line takes the subscription's peeked count from here.
	var subDead *deadPeek
	for _, src := range con.deadSources() {
		dc, pk := con.countDeadLetters(ctx, src)
		if src == con.flags.pipe.sub && subDead == nil {
			subDead = &pk
		}
		j.DeadLetters = append(j.DeadLetters, dc)
	}
	st, err := con.app.explain(ctx, &con.flags.pipe, con.pipeline, con.db, subDead)
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
	es, err := con.db.Early(ctx, "", 0)
	if err != nil {
		return err
	}
	j.Early = map[string]int{}
	for _, e := range es {
		j.Early[e.Consumer] += e.Held
	}
	j.UnresolvedKeys = map[string]int{}
	for _, k := range con.pipeline.Keys {
		ks, err := con.db.Keys(ctx, keys.Filter{Provider: k.Provider, Unresolved: true})
		if err != nil {
			return err
		}
		j.UnresolvedKeys[k.Provider] = len(ks)
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

func (con *console) outbox(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	h, err := outboxHealth(ctx, con.db)
	if err != nil {
		return err
	}
	// Two listings, each paged by its own cursor: the quarantined rows
	// (after=), which wait for an operator, and the pending ones
	// (pending_after=), which wait for the relay.
	q := r.URL.Query()
	cursor := func(name string) (int64, error) {
		s := q.Get(name)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, badRequest{fmt.Sprintf("%s: %q is not an outbox row ID", name, s)}
		}
		return n, nil
	}
	after, err := cursor("after")
	if err != nil {
		return err
	}
	pendingAfter, err := cursor("pending_after")
	if err != nil {
		return err
	}
	list := func(state outbox.State, after int64) (rows []outboxJSON, next int64, err error) {
		rows, err = listOutbox(ctx, con.db, outbox.Filter{States: []outbox.State{state}, AfterRow: after, Limit: pageSize + 1})
		if err == nil && len(rows) > pageSize {
			// More rows: the page's last is the next page's cursor.
			rows = rows[:pageSize]
			next = rows[len(rows)-1].RowID
		}
		return rows, next, err
	}
	quarantined, next, err := list(outbox.Quarantined, after)
	if err != nil {
		return err
	}
	pending, pendingNext, err := list(outbox.Pending, pendingAfter)
	if err != nil {
		return err
	}
	page := map[string]any{"health": h, "quarantined": quarantined, "pending": pending}
	link := func(name string, n int64) string {
		v := url.Values{}
		for k, c := range map[string]int64{"after": after, "pending_after": pendingAfter} {
			if c > 0 {
				v.Set(k, strconv.FormatInt(c, 10))
			}
		}
		v.Set(name, strconv.FormatInt(n, 10))
		return "/outbox?" + v.Encode()
	}
	if next > 0 {
		page["next"] = next
	}
	if pendingNext > 0 {
		page["pending_next"] = pendingNext
	}
	if !api(r) {
		// The pages' links keep the other listing's cursor.
		page["links"] = map[string]string{"next": link("after", next), "pending_next": link("pending_after", pendingNext)}
	}
	con.render(w, r, "outbox", http.StatusOK, page)
	return nil
}

func (con *console) outboxSet(w http.ResponseWriter, r *http.Request) error {
	verb := r.PathValue("verb")
	to := map[string]outbox.State{"requeue": outbox.Pending, "discard": outbox.Discarded}
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
	entry := admin.AuditEntry{Who: who(r), Action: "outbox " + verb, What: fmt.Sprintf("rows %v", ids), Count: len(done)}
	if len(skipped) > 0 {
		entry.Detail = fmt.Sprintf("skipped %v (gone, or not in a state %s applies to)", skipped, verb)
	}
	if err != nil {
		entry.Detail = redactErr(err)
	}
	if aerr := con.record(r.Context(), entry); err != nil || aerr != nil {
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

// countDeadLetters counts the dead letters of src for the dashboard:
// peeked, up to deadCountCap, where the driver can (the peek is returned
// too, for the statement), else received, up to deadLimit, and put back.
func (con *console) countDeadLetters(ctx context.Context, src string) (deadCount, deadPeek) {
	dc := deadCount{Source: redactText(src)}
	s, err := con.app.openDeadLetters(ctx, src)
	if err != nil {
		dc.Error = redactErr(err)
		return dc, deadPeek{err: err}
	}
	defer s.Close()
	pk := peekCount(ctx, s)
	switch {
	case errors.Is(pk.err, errors.ErrUnsupported):
		ds, err := readDead(ctx, s, &dlqFlags{limit: deadLimit, wait: time.Second})
		release(ds)
		if err != nil {
			dc.Error = redactErr(err)
		}
		dc.Count, dc.More = len(ds), len(ds) >= deadLimit
	case pk.err != nil:
		dc.Error = redactErr(pk.err)
	default:
		dc.Count, dc.More = pk.n, pk.n >= deadCountCap
	}
	return dc, pk
}

func (con *console) readDeadLetters(r *http.Request, src string) ([]deadJSON, error) {
	s, err := con.app.openDeadLetters(r.Context(), src)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return listDead(r.Context(), s, &dlqFlags{limit: deadLimit, wait: time.Second}, false)
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
		j := deadSourceJSON{Index: i, Source: redactText(src), ByReason: []deadReason{}}
		if err != nil {
			j.Error = redactErr(err)
		}
		for _, d := range ds {
			k := slices.IndexFunc(j.ByReason, func(g deadReason) bool { return g.Reason == d.Reason })
			if k < 0 {
				j.ByReason, k = append(j.ByReason, deadReason{Reason: d.Reason}), len(j.ByReason)
			}
			j.ByReason[k].Letters = append(j.ByReason[k].Letters, d)
		}
		out = append(out, j)
	}
	con.render(w, r, "dead-letters", http.StatusOK, map[string]any{"sources": out, "to": redactText(con.deadTo())})
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
	if err := checkIDs("id", ids); err != nil {
		return err
	}
	if verb == "discard" && r.PostForm.Get("confirm") != "yes" {
		con.confirm(w, r, fmt.Sprintf("Remove %d dead letter(s) of %s for good?", len(ids), redactText(srcs[i])), ids)
		return nil
	}
	ctx := r.Context()
	s, err := con.app.openDeadLetters(ctx, srcs[i])
	if err != nil {
		return err
	}
	defer s.Close()
	var t *broker.Topic
	what := fmt.Sprintf("%s of %s", quoteAll(ids), redactText(srcs[i]))
	if verb == "replay" {
		if t, err = con.app.openTopic(ctx, con.deadTo()); err != nil {
			return err
		}
		defer t.Close()
		what += " to " + redactText(con.deadTo())
	}
	done, missing, err := moveDead(ctx, s, t, &dlqFlags{limit: deadLimit, wait: time.Second, ids: ids}, func(int) error { return nil })
	entry := admin.AuditEntry{Who: who(r), Action: "dead letters " + verb, What: what, Count: len(done)}
	if len(missing) > 0 {
		entry.Detail = "not found: " + quoteAll(missing)
	}
	if err != nil {
		entry.Detail = redactErr(err)
	}
	if aerr := con.record(ctx, entry); err != nil || aerr != nil {
		return errors.Join(err, aerr)
	}
	con.done(w, r, "/dead-letters", map[string]any{verb + "ed": len(done), "not_found": missing})
	return nil
}

func (con *console) auditPage(w http.ResponseWriter, r *http.Request) error {
	es, err := con.db.Audit(r.Context(), 200)
	if err != nil {
		return fmt.Errorf("audit log: %s", redactErr(err))
	}
	con.render(w, r, "audit", http.StatusOK, es)
	return nil
}
