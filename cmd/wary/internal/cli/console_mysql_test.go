package cli_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

// mysqlUser creates a user with password on the server of dsn, allowed
// everything on dsn's database and dropped when t ends, and returns dsn
// as that user: what a console's pages must never show.
func mysqlUser(t *testing.T, dsn, password string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	root, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	user := strings.ReplaceAll(unique("wary"), "-", "_")
	if len(user) > 32 {
		user = user[len(user)-32:]
	}
	ctx := t.Context()
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'",
		"GRANT ALL ON `" + cfg.DBName + "`.* TO '" + user + "'@'%'",
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", strings.ReplaceAll(q, password, "xxxxx"), err)
		}
	}
	t.Cleanup(func() { _, _ = root.ExecContext(context.Background(), "DROP USER '"+user+"'@'%'") })
	cfg.User, cfg.Passwd = user, password
	return cfg.FormatDSN()
}

// TestConsoleBrowserMySQL drives the console in headless Chromium on a
// MariaDB store (--mysql, as a user with a password): a parked aggregate
// replayed (dry run, then for real) and applied in order, the replay in
// the audit log, on the page and in the database's audit table, and no
// page showing the password.
func TestConsoleBrowserMySQL(t *testing.T) {
	st, shop, storeArgs := mysqlStore(t)
	const password = "s3cretMyPw"
	storeArgs = []string{"--mysql", mysqlUser(t, storeArgs[1], password)}
	topicURL := "mem://" + unique("orders")
	top, sub := mustOpenTopic(t, topicURL), mustOpenSub(t, topicURL+"/billing")
	bctx := browser(t)
	ctx := t.Context()
	const consumer = "billing"

	// A gap parks order-1 at version 1; version 2 is held behind it.
	in, err := shop.newInbox(consumer, sub.Capabilities(), &idem.Options{Telemetry: broker.Telemetry{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	failing := true
	handle := func(d *broker.Delivery) idem.Result {
		r, err := in.Handle(ctx, d, func(_ context.Context, _ *sql.Tx, d *broker.Delivery) error {
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
	addRow(t, shop, unique("order"))

	con := startConsole(t, append([]string{"--broker", topicURL, "--subscription", topicURL + "/billing", "--consumer", consumer}, storeArgs...)...)
	for _, path := range []string{"/", "/api/", "/parked", "/api/parked", "/early", "/outbox", "/api/outbox", "/audit", "/api/audit"} {
		code, body := get(t, con.base+path, nil)
		if code != 200 {
			t.Errorf("GET %s: %d: %s", path, code, body)
		}
		if strings.Contains(body, password) {
			t.Errorf("GET %s shows the store's password", path)
		}
	}
	page := func(path string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(con.base + path) }
	browse(t, bctx, "dashboard", page("/"), chromedp.WaitVisible(chromedp.CSS("#findings")))
	wantText(t, "parked count", textOf(t, bctx, "#parked-counts"), consumer, "2")
	browse(t, bctx, "outbox", page("/outbox"), chromedp.WaitVisible(chromedp.CSS("#pending tr.row")))

	// Replay: a dry run changes nothing; then for real, with progress.
	browse(t, bctx, "parked", page("/parked"), chromedp.WaitVisible(chromedp.CSS(`tr.aggregate[data-aggregate="order-1"]`)))
	wantText(t, "parked row", textOf(t, bctx, `tr.aggregate[data-aggregate="order-1"]`), "order-1/placed v1, order-1/paid v2", "gap: order-1 at version 0")
	browse(t, bctx, "dry run", chromedp.Click(chromedp.CSS(`input[name=aggregate][value="order-1"]`)),
		chromedp.Click(chromedp.CSS("#replay-"+consumer)), chromedp.WaitVisible(chromedp.CSS("#plan")))
	wantText(t, "dry run", textOf(t, bctx, "#plan"), "2 message(s)", "1 aggregate(s)", "Nothing has been changed")
	if ps, err := in.Parked(ctx, idem.ParkedFilter{}); err != nil || len(ps) != 2 {
		t.Fatalf("after the dry run: %d parked (%v), want 2", len(ps), err)
	}
	browse(t, bctx, "replay", chromedp.Click(chromedp.CSS("#replay-now")), chromedp.WaitVisible(chromedp.CSS(`#status[data-done="true"]`)))
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

	// The audit log: on the page, and in MariaDB's audit table.
	entries := auditEntries(t, bctx, con.base)
	if len(entries) != 1 || !strings.Contains(entries[0], "parked replay") || !strings.Contains(entries[0], "order-1") {
		t.Fatalf("audit log after the replay: %q, want one parked replay entry", entries)
	}
	var action, what, who string
	var count int
	if err := st.DB().QueryRowContext(ctx, "SELECT action, what, who, count FROM wary_operator_audit").Scan(&action, &what, &who, &count); err != nil {
		t.Fatalf("the audit table: %v", err)
	}
	if action != "parked replay" || !strings.Contains(what, `"order-1"`) || !strings.Contains(who, "via console") || count != 2 {
		t.Errorf("audit row: action %q what %q who %q count %d, want the console's parked replay of order-1's 2 messages", action, what, who, count)
	}
	if strings.Contains(what+who, password) {
		t.Errorf("the audit row shows the store's password: %q %q", what, who)
	}
	if s := con.errout.String(); strings.Contains(s, password) {
		t.Errorf("the console's stderr shows the store's password: %s", s)
	}
}
