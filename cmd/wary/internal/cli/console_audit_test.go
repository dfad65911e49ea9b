package cli_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
)

// csrfOf reads the CSRF token of a console's pages.
func csrfOf(t *testing.T, base string) string {
	t.Helper()
	_, body := get(t, base+"/parked", nil)
	m := csrfMeta.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on /parked")
	}
	return m[1]
}

// TestAuditQuotesNames: the audit log quotes every aggregate name, so that
// discarding the one aggregate "a, b" is not recorded as discarding "a"
// and "b", and a newline or a terminal escape in a name is written
// escaped (a replay from the command line, which takes any name).
// On PostgreSQL and on MariaDB (--mysql).
func TestAuditQuotesNames(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		st, storeArgs := pgStore(t)
		auditQuotesNames(t, pgShop(st), storeArgs)
	})
	t.Run("mysql", func(t *testing.T) {
		_, shop, storeArgs := mysqlStore(t)
		auditQuotesNames(t, shop, storeArgs)
	})
}

func auditQuotesNames[Tx any](t *testing.T, shop shopStore[Tx], storeArgs []string) {
	const consumer = "billing"
	var msgs []*broker.Message
	for i, agg := range []string{"a, b", "a", "b", "x\ny", "\x1b[2Jevil"} {
		msgs = append(msgs, event("m"+strconv.Itoa(i), agg, 1))
	}
	park(t, shop, consumer, "gap", msgs...)
	con := startConsole(t, append([]string{"--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", consumer}, storeArgs...)...)
	h := map[string]string{"X-CSRF-Token": csrfOf(t, con.base)}
	for _, aggs := range [][]string{{"a, b"}, {"a", "b"}} {
		if code := post(t, con.base+"/api/parked/discard", url.Values{"consumer": {consumer}, "aggregate": aggs, "confirm": {"yes"}}, h); code != 200 {
			t.Fatalf("discard %q: %d", aggs, code)
		}
	}
	w := newWary(t)
	for _, agg := range []string{"x\ny", "\x1b[2Jevil"} {
		w.want(cli.ExitOK, append([]string{"parked", "replay", "--consumer", consumer, "--aggregate", agg, "--to", "mem://" + unique("replayed"), "--yes"}, storeArgs...)...)
	}
	_, body := get(t, con.base+"/api/audit", nil)
	var entries []struct {
		Action string `json:"action"`
		What   string `json:"what"`
	}
	if err := json.Unmarshal([]byte(body), &entries); err != nil || len(entries) != 4 {
		t.Fatalf("audit log: %v %s", err, body)
	}
	// Newest first.
	want := []string{`consumer "billing" aggregates "\x1b[2Jevil" to mem://`, `consumer "billing" aggregates "x\ny" to mem://`,
		`consumer "billing" aggregates "a", "b"`, `consumer "billing" aggregates "a, b"`}
	for i, e := range entries {
		if !strings.HasPrefix(e.What, want[i]) {
			t.Errorf("audit entry %d (%s): what %q, want %q…", i, e.Action, e.What, want[i])
		}
		if strings.ContainsAny(e.What, "\n\x1b") {
			t.Errorf("audit entry %d (%s): what %q holds a raw control character", i, e.Action, e.What)
		}
	}
}
