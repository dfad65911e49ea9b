package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/redact"
)

// TestConsoleBrowser drives the console in headless Chromium against
// PostgreSQL and RabbitMQ: a parked aggregate replayed (dry run, then for
// real) and applied in order; a quarantined outbox row requeued and
// published; a dead letter replayed and consumed once; the probe; each
// action in the audit log. It takes each page's screenshot, and with
// WARY_SCREENSHOTS=1 writes it to docs/images/console-*.png.
func TestConsoleBrowser(t *testing.T) {
	st, storeArgs := pgStore(t)
	top, topicURL, sub, subURL := rabbitTopology(t)
	bctx := browser(t)
	ctx := t.Context()
	const consumer = "billing"

	// A gap parks order-1 at version 1; version 2 is held behind it.
	in, err := idem.NewInbox(st, consumer, sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	failing := true
	handle := func(d *broker.Delivery) idem.Result {
		r, err := in.Handle(ctx, d, func(_ context.Context, _ pgx.Tx, d *broker.Delivery) error {
			if failing {
				return &idem.ParkError{Reason: "gap: order-1 at version 0", Now: true}
			}
			applied = append(applied, d.Message.ID)
			return nil
		})
		var pe *idem.ParkError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("handle %s: %v", d.Message.ID, err)
		}
		return r
	}
	publish(t, top, event("order-1/placed", "order-1", 1))
	if r := handle(receive(t, sub, 1)[0]); r != idem.ResultParked {
		t.Fatalf("first event: %v, want parked", r)
	}
	publish(t, top, event("order-1/paid", "order-1", 2))
	if r := handle(receive(t, sub, 1)[0]); r != idem.ResultHeld {
		t.Fatalf("second event: %v, want held", r)
	}
	// An outbox row that the relay quarantines: its topic takes no message
	// this large.
	agg := unique("order")
	addRow(t, pgShop(st), agg)
	small := mustOpenTopic(t, "mem://"+unique("small")+"?maxsize=10")
	quarantine, err := outbox.NewRelay(st, small, &outbox.RelayOptions{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quarantine.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// A pending row, which no relay has tried yet.
	pendingAgg := unique("order")
	addRow(t, pgShop(st), pendingAgg)
	// A dead letter.
	deadID := unique("dead")
	publish(t, top, event(deadID, "order-9", 1))
	if err := receive(t, sub, 1)[0].DeadLetter(ctx, "poison: cannot parse"); err != nil {
		t.Fatal(err)
	}

	// Early events held for consumer shipping: order-5 is at version 1,
	// its version 3 waits for version 2.
	schema := storeArgs[len(storeArgs)-1]
	ship := newHolder(t, pgShop(st), func(q string) error { _, err := st.Pool().Exec(ctx, q); return err }, schema+".ship_versions", "shipping", "order-5")
	wantResults(t, ship.deliver(event("o5-v3", "order-5", 3)), idem.ResultEarly)

	// Dead letters of three subscriptions named as operators name them:
	// the queue above with every setting in its URL, a queue that does
	// not exist and a Service Bus subscription the console cannot open,
	// each URL longer than a dashboard card is wide.
	exchange := strings.TrimSuffix(strings.TrimPrefix(topicURL, "rabbit://"), "/")
	longSub := subURL + "&exchange=" + exchange + "&management=http://rabbitmq-management.internal.example:15672"
	const missingSub = "rabbit://orders-billing-consumer-queue-with-a-long-name?exchange=orders.events&management=http://rabbitmq-management.internal.example:15672&delivery_limit=5"
	const serviceBusSub = "servicebus://orders-events-topic-of-the-billing-domain/Subscriptions/billing-consumer-subscription-with-a-long-name?sessions=true&topic=true"
	con := startConsole(t, append([]string{"--broker", topicURL, "--subscription", subURL, "--consumer", consumer, "--sample", "1s",
		"--dead-letters", longSub, "--dead-letters", missingSub, "--dead-letters", serviceBusSub}, storeArgs...)...)
	page := func(path string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(con.base + path) }

	// The dashboard and the dead letters fit a wide and a narrow window,
	// long URLs and all.
	for _, w := range []int64{1400, 800} {
		browse(t, bctx, "dashboard", chromedp.EmulateViewport(w, 900), page("/"), chromedp.WaitVisible(chromedp.CSS("#findings")))
		fits(t, bctx, fmt.Sprintf("dashboard at %d px", w))
		browse(t, bctx, "dead letters", page("/dead-letters"), chromedp.WaitVisible(chromedp.CSS(`tr.dead[data-id="`+deadID+`"]`)))
		fits(t, bctx, fmt.Sprintf("dead letters at %d px", w))
	}
	browse(t, bctx, "narrow", chromedp.EmulateViewport(800, 900), page("/"), chromedp.WaitVisible(chromedp.CSS("#findings")), screenshot("dashboard-narrow"))

	// The dashboard: the guarantee and every count.
	browse(t, bctx, "dashboard", chromedp.EmulateViewport(1400, 900), page("/"), chromedp.WaitVisible(chromedp.CSS("#findings")), screenshot("dashboard"))
	wantText(t, "parked count", textOf(t, bctx, "#parked-counts"), consumer, "2")
	wantText(t, "quarantined count", textOf(t, bctx, "#quarantined"), "1")
	wantText(t, "dead letters", textOf(t, bctx, "#dead-counts"), "1", "orders-billing-consumer-queue-with-a-long-name", "billing-consumer-subscription-with-a-long-name")
	if n := titled(t, bctx, "#dead-counts [title]", longSub, missingSub, serviceBusSub); n != 3 {
		t.Errorf("dashboard: %d dead-letter sources carry their whole URL in a title, want 3", n)
	}
	wantText(t, "statement", textOf(t, bctx, "table.statement"), "transport", "order per queue")
	wantText(t, "early count", textOf(t, bctx, "#early-counts"), "shipping", "1")

	// Held early events: read-only, with the version awaited and when
	// they are parked (the console's --early-limit, default 1h).
	browse(t, bctx, "early", page("/early"), chromedp.WaitVisible(chromedp.CSS(`tr.held[data-aggregate="order-5"]`)), screenshot("early"))
	wantText(t, "early row", textOf(t, bctx, `tr.held[data-aggregate="order-5"]`), "shipping", "v2", "v3–v3", " ago")
	wantText(t, "early limit", textOf(t, bctx, "main"), "early limit (1h0m0s")
	var held struct {
		EarlyLimit string `json:"early_limit"`
		Aggregates []struct {
			AggregateID string `json:"aggregate_id"`
			Awaited     int64  `json:"awaited"`
			Held        int    `json:"held"`
		} `json:"aggregates"`
	}
	code, body := get(t, con.base+"/api/early?consumer=shipping", nil)
	if err := json.Unmarshal([]byte(body), &held); code != 200 || err != nil || held.EarlyLimit != "1h0m0s" || len(held.Aggregates) != 1 ||
		held.Aggregates[0].AggregateID != "order-5" || held.Aggregates[0].Awaited != 2 || held.Aggregates[0].Held != 1 {
		t.Errorf("GET /api/early: %d %s (%v)", code, body, err)
	}
	wantResults(t, ship.deliver(event("o5-v2", "order-5", 2)), idem.ResultApplied)
	browse(t, bctx, "nothing held", page("/early"), chromedp.WaitVisible(chromedp.CSS("#nothing-held")))

	// Parked: the aggregate, then its messages with the bodies hidden
	// until asked for.
	browse(t, bctx, "parked", page("/parked"), chromedp.WaitVisible(chromedp.CSS(`tr.aggregate[data-aggregate="order-1"]`)), screenshot("parked"))
	noneChecked(t, bctx, "parked")
	wantText(t, "parked row", textOf(t, bctx, `tr.aggregate[data-aggregate="order-1"]`), "order-1/placed v1, order-1/paid v2", "gap: order-1 at version 0")
	browse(t, bctx, "aggregate", page("/parked/aggregate?consumer="+consumer+"&aggregate=order-1"), chromedp.WaitVisible(chromedp.CSS("article.message")))
	if s := textOf(t, bctx, "main"); strings.Contains(s, "body of order-1") || !strings.Contains(s, "traceparent") {
		t.Errorf("aggregate page before asking: want headers and no body:\n%s", s)
	}
	browse(t, bctx, "show body", chromedp.Click(chromedp.CSS("a.show-body")), chromedp.WaitVisible(chromedp.CSS("pre.body")), screenshot("aggregate"))
	wantText(t, "body", textOf(t, bctx, "pre.body"), "body of order-1/placed")

	// Replay: a dry run changes nothing; then for real, with progress.
	// At half an aggregate a second the job page loads before the replay
	// starts, and its script polls the progress until it is done.
	browse(t, bctx, "dry run", page("/parked"), chromedp.Click(chromedp.CSS(`input[name=aggregate][value="order-1"]`)),
		chromedp.SetValue(chromedp.CSS("input[name=rate]"), "0.5"), chromedp.Click(chromedp.CSS("#replay-"+consumer)), chromedp.WaitVisible(chromedp.CSS("#plan")), screenshot("replay-dry-run"))
	wantText(t, "dry run", textOf(t, bctx, "#plan"), "2 message(s)", "1 aggregate(s)", "Nothing has been changed")
	if ps, err := in.Parked(ctx, idem.ParkedFilter{}); err != nil || len(ps) != 2 {
		t.Fatalf("after the dry run: %d parked (%v), want 2", len(ps), err)
	}
	browse(t, bctx, "replay", chromedp.Click(chromedp.CSS("#replay-now")), chromedp.WaitVisible(chromedp.CSS(`#status[data-done="true"]`)), screenshot("job"))
	wantText(t, "replay job", textOf(t, bctx, "#status"), "done")
	failing = false
	for _, d := range receive(t, sub, 2) {
		if r := handle(d); r != idem.ResultApplied {
			t.Errorf("replayed %s: %v, want applied", d.Message.ID, r)
		}
	}
	if !slices.Equal(applied, []string{"order-1/placed", "order-1/paid"}) {
		t.Errorf("applied %v, want order-1/placed then order-1/paid", applied)
	}
	browse(t, bctx, "nothing parked", page("/parked"), chromedp.WaitVisible(chromedp.CSS("#nothing-parked")))
	entries := auditEntries(t, bctx, con.base)
	if len(entries) != 1 || !strings.Contains(entries[0], "parked replay") || !strings.Contains(entries[0], "order-1") {
		t.Fatalf("audit log after the replay: %q, want one parked replay entry", entries)
	}

	// Outbox: the quarantined row apart from the pending one; requeued,
	// then published with it.
	browse(t, bctx, "outbox", page("/outbox"), chromedp.WaitVisible(chromedp.CSS("#quarantined tr.row")), chromedp.WaitVisible(chromedp.CSS("#pending tr.row")), screenshot("outbox"))
	noneChecked(t, bctx, "outbox")
	fits(t, bctx, "outbox at 1400 px")
	wantText(t, "quarantined row", textOf(t, bctx, "#quarantined tr.row"), agg, "too large")
	wantText(t, "pending row", textOf(t, bctx, "#pending tr.row"), pendingAgg)
	if s := textOf(t, bctx, "#quarantined"); strings.Contains(s, pendingAgg) {
		t.Errorf("the quarantined rows list the pending row of %s:\n%s", pendingAgg, s)
	}
	if s := textOf(t, bctx, "#pending"); strings.Contains(s, agg) {
		t.Errorf("the pending rows list the quarantined row of %s:\n%s", agg, s)
	}
	browse(t, bctx, "requeue", chromedp.Click(chromedp.CSS("#quarantined tr.row input[name=row]")), chromedp.Click(chromedp.CSS("#requeue")),
		chromedp.WaitVisible(chromedp.CSS("#nothing-quarantined")))
	wantText(t, "pending after the requeue", textOf(t, bctx, "#pending"), agg, pendingAgg)
	relay, err := outbox.NewRelay(st, top, &outbox.RelayOptions{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var published []string
	for _, d := range receive(t, sub, 2) {
		published = append(published, d.Message.Headers.Get(broker.HeaderAggregateID))
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if slices.Sort(published); !slices.Equal(published, slices.Sorted(slices.Values([]string{agg, pendingAgg}))) {
		t.Errorf("published the rows of %v, want the requeued row of %s and the pending one of %s", published, agg, pendingAgg)
	}

	// Dead letters: grouped by reason, replayed with the original ID,
	// consumed once.
	// Nothing is selected before the operator chooses.
	browse(t, bctx, "dead letters", page("/dead-letters"), chromedp.WaitVisible(chromedp.CSS(`tr.dead[data-id="`+deadID+`"]`)), screenshot("dead-letters"))
	noneChecked(t, bctx, "dead letters")
	if n := titled(t, bctx, "section.source h2[title]", longSub, missingSub, serviceBusSub); n != 3 {
		t.Errorf("dead letters: %d sources carry their whole URL in a title, want 3", n)
	}
	wantText(t, "reason", textOf(t, bctx, "form.reason h3"), "poison: cannot parse")
	browse(t, bctx, "replay dead letter", chromedp.Click(chromedp.CSS(`tr.dead[data-id="`+deadID+`"] input[name=id]`)),
		chromedp.Click(chromedp.CSS("button.replay-dead")), chromedp.WaitVisible(chromedp.CSS("section.source")))
	back := receive(t, sub, 1)[0]
	if back.Message.ID != deadID || !strings.Contains(back.Message.Headers.Get(driver.HeaderReplayedBy), "poison: cannot parse") {
		t.Errorf("replayed dead letter: %+v", back.Message)
	}
	if err := back.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if ds, err := sub.Receive(rctx, 10); err == nil || len(ds) > 0 {
		t.Errorf("after the replay the consumer got %d more message(s) (%v), want the dead letter once", len(ds), err)
	}
	cancel()

	// The probe, against the memory driver, with live progress.
	browse(t, bctx, "probe", page("/probe"), chromedp.SetValue(chromedp.CSS("#probe-url"), "mem://scratch?profile=sqsfifo"),
		chromedp.SetValue(chromedp.CSS("#probe-only"), "order-within-scope,ack"), screenshot("probe"),
		chromedp.Click(chromedp.CSS("#probe-run")), chromedp.WaitVisible(chromedp.CSS("#probe-results")), screenshot("probe-result"))
	wantText(t, "probe", textOf(t, bctx, "#probe-results"), "order-within-scope", "ack", "kept")

	// Discard asks first, naming what goes.
	failing = true
	publish(t, top, event("order-2/placed", "order-2", 1))
	if r := handle(receive(t, sub, 1)[0]); r != idem.ResultParked {
		t.Fatalf("order-2: %v, want parked", r)
	}
	browse(t, bctx, "discard", page("/parked"), chromedp.Click(chromedp.CSS(`input[name=aggregate][value="order-2"]`)),
		chromedp.Click(chromedp.CSS("#discard-"+consumer)), chromedp.WaitVisible(chromedp.CSS("#what-goes")), screenshot("confirm"))
	wantText(t, "confirmation", textOf(t, bctx, "main"), "Discard 1 parked message(s)", "order-2/placed")
	browse(t, bctx, "confirm discard", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#nothing-parked")))

	entries = auditEntries(t, bctx, con.base)
	browse(t, bctx, "audit", screenshot("audit"))
	for _, want := range []string{"parked discard", "probe", "dead letters replay", "outbox requeue", "parked replay"} {
		if !slices.ContainsFunc(entries, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("audit log %q lacks %q", entries, want)
		}
	}
	browse(t, bctx, "dashboard after", page("/"), chromedp.WaitVisible(chromedp.CSS("#findings")))
	wantText(t, "parked count after", textOf(t, bctx, "#parked-counts"), "0")

	// Through the API with the page's CSRF token: a rate out of range is
	// refused, a discard without confirm=yes answers what would go.
	_, home := get(t, con.base+"/", nil)
	m := csrfMeta.FindStringSubmatch(home)
	if m == nil {
		t.Fatal("the dashboard carries no CSRF token")
	}
	publish(t, top, event("order-3/placed", "order-3", 1))
	if r := handle(receive(t, sub, 1)[0]); r != idem.ResultParked {
		t.Fatalf("order-3: %v, want parked", r)
	}
	withCSRF := map[string]string{"X-CSRF-Token": m[1]}
	for _, rate := range []string{"NaN", "0", "1e9", "fast"} {
		if code := post(t, con.base+"/api/parked/replay", url.Values{"consumer": {consumer}, "aggregate": {"order-3"}, "rate": {rate}, "dry_run": {"false"}}, withCSRF); code != 400 {
			t.Errorf("replay at rate %s: %d, want 400", rate, code)
		}
	}
	if code := post(t, con.base+"/api/parked/discard", url.Values{"consumer": {consumer}, "aggregate": {"order-3"}}, withCSRF); code != 409 {
		t.Errorf("discard without confirm=yes: %d, want 409", code)
	}
	if code := post(t, con.base+"/api/parked/discard", url.Values{"consumer": {consumer}, "aggregate": {"order-3"}, "confirm": {"yes"}}, withCSRF); code != 200 {
		t.Errorf("discard with confirm=yes: %d, want 200", code)
	}
	if ps, err := in.Parked(ctx, idem.ParkedFilter{}); err != nil || len(ps) != 0 {
		t.Errorf("after the API's discard: %d parked (%v), want 0", len(ps), err)
	}

	// Without a token, a request for another host name (DNS rebinding)
	// gets nothing.
	if code, body := get(t, con.base+"/", map[string]string{"Host": "evil.example:80"}); code != 403 || strings.Contains(body, m[1]) {
		t.Errorf("GET with Host evil.example: %d, want 403 without the CSRF token", code)
	}

	// A state-changing request without the page's CSRF token is refused.
	for _, path := range []string{"/outbox/requeue", "/api/parked/discard", "/dead-letters/replay"} {
		if code := post(t, con.base+path, url.Values{"row": {"1"}, "consumer": {consumer}, "aggregate": {"order-1"}}, nil); code != 403 {
			t.Errorf("POST %s without a CSRF token: %d, want 403", path, code)
		}
		if code := post(t, con.base+path, url.Values{"csrf": {"forged"}}, nil); code != 403 {
			t.Errorf("POST %s with a wrong CSRF token: %d, want 403", path, code)
		}
	}
}

// fits fails the test if the page scrolls sideways, if the content of a
// card, a dead-letter source or a table is wider than its box, or if a
// count lies outside its card or the window.
func fits(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const bad = [], vw = document.documentElement.clientWidth;
		if (document.documentElement.scrollWidth > vw) bad.push("the page is " + document.documentElement.scrollWidth + " px wide in a window of " + vw);
		const name = el => (el.querySelector("h2, h3") || el).textContent.trim().slice(0, 40);
		for (const el of document.querySelectorAll(".card, section.source, form.reason, main")) {
			if (el.scrollWidth > el.clientWidth) bad.push(el.tagName.toLowerCase() + "." + el.className + " " + JSON.stringify(name(el)) + ": content " + el.scrollWidth + " px wide in " + el.clientWidth);
		}
		for (const el of document.querySelectorAll(".num, #dead-counts a, form.reason h3 small")) {
			const r = el.getBoundingClientRect(), box = (el.closest(".card, section") || document.body).getBoundingClientRect();
			if (r.left < box.left || r.right > box.right || r.right > vw) bad.push("the count " + JSON.stringify(el.textContent.trim()) + " at " + Math.round(r.left) + "–" + Math.round(r.right) + " px, outside its box (" + Math.round(box.left) + "–" + Math.round(box.right) + ") or the window (" + vw + ")");
		}
		return bad;
	})()`))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, b := range bad {
		t.Errorf("%s: %s", what, b)
	}
}

// noneChecked fails the test if a checkbox of the page is checked.
func noneChecked(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	checked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input[type=checkbox]:checked")].map(e => e.name + "=" + e.value)`))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(checked) > 0 {
		t.Errorf("%s: checked on load: %q, want nothing selected before the operator chooses", what, checked)
	}
}

// titled counts the elements sel matches whose title is one of urls, as
// the console shows them (redacted).
func titled(t *testing.T, ctx context.Context, sel string, urls ...string) int {
	t.Helper()
	titles, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(`+strconv.Quote(sel)+`)].map(e => e.title)`))
	if err != nil {
		t.Fatalf("titles of %s: %v", sel, err)
	}
	n := 0
	for _, u := range urls {
		if slices.Contains(titles, redact.String(u)) {
			n++
		}
	}
	return n
}

// auditEntries reads the audit log page's rows.
func auditEntries(t *testing.T, ctx context.Context, base string) []string {
	t.Helper()
	browse(t, ctx, "audit", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.CSS("h1")))
	var out []string
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.entry").length`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		out = append(out, textOf(t, ctx, "tr.entry:nth-of-type("+strconv.Itoa(i+2)+")"))
	}
	return out
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)">`)

// TestConsoleTokenAndReadOnly: with a token, nothing is served without
// it, and no page or API answer shows it; read-only refuses every action.
// On PostgreSQL and on MariaDB (--mysql).
func TestConsoleTokenAndReadOnly(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		_, storeArgs := pgStore(t)
		consoleTokenAndReadOnly(t, storeArgs)
	})
	t.Run("mysql", func(t *testing.T) {
		_, _, storeArgs := mysqlStore(t)
		consoleTokenAndReadOnly(t, storeArgs)
	})
}

func consoleTokenAndReadOnly(t *testing.T, storeArgs []string) {
	// Without the audit table (no console ran yet), a command records
	// nothing and says nothing of it.
	w := newWary(t)
	requeue := append([]string{"outbox", "requeue", "999", "--yes"}, storeArgs...)
	if r := w.want(cli.ExitFinding, requeue...); strings.Contains(r.errout, "audit") {
		t.Errorf("stderr without an audit table: %q", r.errout)
	}
	const token = "0123456789abcdef-console"
	const secret = "s3cretpw"
	con := startConsole(t, append([]string{"--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", "billing",
		"--token", token, "--read-only", "--replay-to", "amqp://wary:" + secret + "@127.0.0.1:1/?exchange=orders",
		"--dead-letters-to", "amqp://wary:" + secret + "@127.0.0.1:1/?exchange=orders"}, storeArgs...)...)
	if code, _ := get(t, con.base+"/api/", nil); code != 401 {
		t.Errorf("API without the token: %d, want 401", code)
	}
	if code, _ := get(t, con.base+"/parked", nil); code != 303 {
		t.Errorf("page without the token: %d, want 303 to /login", code)
	}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	if code, _ := get(t, con.base+"/api/", map[string]string{"Authorization": "Bearer wrong-token-wrong-token"}); code != 401 {
		t.Errorf("API with a wrong token: %d, want 401", code)
	}
	var csrf string
	for _, path := range []string{"/", "/api/", "/parked", "/api/parked", "/early", "/api/early", "/outbox", "/api/outbox", "/dead-letters", "/audit", "/probe"} {
		code, body := get(t, con.base+path, bearer)
		if code != 200 {
			t.Errorf("GET %s with the token: %d, want 200: %s", path, code, body)
		}
		if code == 200 && path == "/api/parked" && !strings.Contains(body, "amqp://") {
			t.Errorf("GET %s does not say where replays go: %s", path, body)
		}
		if strings.Contains(body, token) || strings.Contains(body, secret) {
			t.Errorf("GET %s shows the token or a password", path)
		}
		if m := csrfMeta.FindStringSubmatch(body); m != nil {
			csrf = m[1]
		}
	}
	if csrf == "" {
		t.Fatal("no page carries the CSRF token")
	}
	// Once the console made it, the commands record their actions too.
	w.want(cli.ExitFinding, requeue...)
	if _, body := get(t, con.base+"/api/audit", bearer); !strings.Contains(body, `"action": "outbox requeue"`) || !strings.Contains(body, "via wary outbox requeue") {
		t.Errorf("audit log after wary outbox requeue: %s", body)
	}
	h := map[string]string{"Authorization": "Bearer " + token, "X-CSRF-Token": csrf}
	if code := post(t, con.base+"/api/outbox/requeue", url.Values{"row": {"1"}}, h); code != 403 {
		t.Errorf("POST on a read-only console: %d, want 403", code)
	}
}
