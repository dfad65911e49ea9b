package cli_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleRefusesBadNames: a consumer, aggregate or message ID the
// stores could not hold (a NUL) or that breaks their rules gets 400 with
// what is wrong, before any query, on every page and API call that takes
// one; no database error shows.
func TestConsoleRefusesBadNames(t *testing.T) {
	_, storeArgs := pgStore(t)
	con := startConsole(t, append([]string{"--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", "billing"}, storeArgs...)...)
	for _, path := range []string{
		"/parked?consumer=%00", "/api/parked?consumer=%00", "/parked?consumer=a%20b",
		"/parked?consumer=billing&after=%00", "/api/parked?consumer=billing&after=%00",
		"/parked/aggregate?consumer=x&aggregate=%00", "/api/parked/aggregate?consumer=x&aggregate=%00",
		"/parked/aggregate?consumer=%00&aggregate=a", "/api/parked/aggregate?consumer=&aggregate=a",
		"/parked/aggregate?consumer=x&aggregate=a%0Ab", "/parked/aggregate?consumer=x&aggregate=a&body=%00",
		"/early?consumer=%00", "/api/early?consumer=%00", "/early?consumer=" + strings.Repeat("c", 64),
		"/outbox?after=%00", "/api/outbox?after=-1", "/outbox?pending_after=%00", "/api/outbox?after=1&pending_after=0",
	} {
		code, body := get(t, con.base+path, nil)
		if code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400: %.300s", path, code, body)
		}
		if strings.Contains(body, "SQLSTATE") || strings.Contains(body, "invalid byte sequence") {
			t.Errorf("GET %s shows the database's error: %.300s", path, body)
		}
	}
	h := map[string]string{"X-CSRF-Token": csrfOf(t, con.base)}
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/api/parked/replay", url.Values{"consumer": {"\x00"}, "aggregate": {"a"}}},
		{"/api/parked/replay", url.Values{"consumer": {"billing"}, "aggregate": {"a\x00"}}},
		{"/api/parked/discard", url.Values{"consumer": {"billing"}, "aggregate": {"\x00"}, "confirm": {"yes"}}},
		{"/parked/discard", url.Values{"consumer": {"bil\x00ling"}, "aggregate": {"a"}}},
		{"/api/dead-letters/replay", url.Values{"source": {"0"}, "id": {"\x00"}}},
		{"/api/dead-letters/discard", url.Values{"source": {"0"}, "id": {"a\x1b[2J"}, "confirm": {"yes"}}},
	} {
		if code := post(t, con.base+c.path, c.form, h); code != http.StatusBadRequest {
			t.Errorf("POST %s %q: %d, want 400", c.path, c.form.Encode(), code)
		}
	}
	// Good names still answer.
	for _, path := range []string{"/api/parked?consumer=billing", "/api/parked/aggregate?consumer=billing&aggregate=", "/api/early?consumer=billing"} {
		if code, body := get(t, con.base+path, nil); code != http.StatusOK {
			t.Errorf("GET %s: %d %.300s", path, code, body)
		}
	}
}
