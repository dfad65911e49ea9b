package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// parkMany parks n messages of size bytes for consumer, the first five
// of each aggregate (agg-0000, agg-0001, ...) but the last big ones, all
// of aggregate agg-big; each body starts with "body of m<i> ".
func parkMany(t *testing.T, st *postgres.Store, consumer string, n, big, size int) {
	t.Helper()
	msgs := make([]*broker.Message, n)
	for i := range n {
		id, agg := fmt.Sprintf("m%04d", i), fmt.Sprintf("agg-%04d", i/5)
		if i >= n-big {
			agg = "agg-big"
		}
		body := []byte("body of " + id + " ")
		body = append(body, strings.Repeat("x", size-len(body))...)
		msgs[i] = &broker.Message{ID: id, Key: agg, Body: body, Headers: broker.Headers{
			{broker.HeaderAggregateID, agg}, {broker.HeaderAggregateVersion, strconv.Itoa(i + 1)}}}
	}
	park(t, pgShop(st), consumer, "gap", msgs...)
}

// allocated returns how many bytes this process allocated while f ran:
// the console runs in it, so its handlers' allocations count.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestConsoleListingsMemoryBounded: with 1,500 parked messages (300 of
// them of one aggregate) and 1,500 outbox rows of 64 KiB each (1,000
// quarantined, 500 pending),
// a GET of the parked, the aggregate and the outbox pages (and their API)
// allocates a small part of what the bodies weigh: listings read no body,
// a page at a time; the aggregate page reads the one body it shows. Paging
// through /api/parked lists every aggregate once, whole, but for the big
// one's first page; paging through /api/outbox lists each quarantined and
// each pending row once, in its own listing.
func TestConsoleListingsMemoryBounded(t *testing.T) {
	st, storeArgs := pgStore(t)
	ctx := t.Context()
	const consumer, n, big, size = "billing", 1500, 300, 64 << 10
	parkMany(t, st, consumer, n, big, size)
	payload := []byte(strings.Repeat("p", size))
	rows := make([]*outbox.Message, n)
	for i := range rows {
		rows[i] = &outbox.Message{AggregateID: fmt.Sprintf("o-%04d", i), Version: 1, Type: "t", Payload: payload}
	}
	addRows(t, pgShop(st), rows...)
	schema := storeArgs[len(storeArgs)-1]
	if _, err := st.Pool().Exec(ctx, "UPDATE "+pgx.Identifier{schema, "wary_outbox"}.Sanitize()+" SET state = 2, last_error = 'too large' WHERE id <= 1000"); err != nil {
		t.Fatal(err)
	}

	con := startConsole(t, append([]string{"--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", consumer}, storeArgs...)...)
	const bound = n * size / 10
	for _, path := range []string{"/parked", "/api/parked", "/parked/aggregate?consumer=billing&aggregate=agg-big&body=1251",
		"/api/parked/aggregate?consumer=billing&aggregate=agg-big&body=1251", "/outbox", "/api/outbox"} {
		var code int
		var body string
		got := allocated(func() { code, body = get(t, con.base+path, nil) })
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		t.Logf("GET %s: %d bytes allocated, a page of %d bytes", path, got, len(body))
		if got > bound {
			t.Errorf("GET %s allocated %d bytes, over %d (a tenth of the bodies)", path, got, bound)
		}
		if strings.Contains(path, "aggregate") {
			// Parked message 1251 is m1250, of agg-big: its body shows,
			// and no other.
			if strings.Count(body, "body of m") != 1 || !strings.Contains(body, "body of m1250 ") {
				t.Errorf("GET %s: shows %d bodies, want only m1250's", path, strings.Count(body, "body of m"))
			}
		} else if strings.Contains(body, "body of m") || strings.Contains(body, "pppppppp") {
			t.Errorf("GET %s shows a body", path)
		}
		// The pages link to the next: after the 40th aggregate of five
		// (the page's 200 messages, whole), and after the 200th row of
		// each outbox listing.
		for page, nexts := range map[string][]string{"/parked": {`href="/parked?consumer=billing&amp;after=agg-0039"`},
			"/outbox": {`href="/outbox?after=200"`, `href="/outbox?pending_after=1200"`}} {
			for _, next := range nexts {
				if path == page && !strings.Contains(body, next) {
					t.Errorf("GET %s does not link to the next page (%s)", path, next)
				}
			}
		}
	}

	// Paging through one consumer's parked messages lists each once, whole
	// aggregates per page.
	type page struct {
		Consumers []struct {
			Count      int  `json:"count"`
			More       bool `json:"more"`
			Next       string
			Aggregates []struct {
				Aggregate string `json:"aggregate"`
				More      bool   `json:"more"`
				Messages  []struct {
					MessageID string `json:"message_id"`
					Body      string `json:"body"`
				} `json:"messages"`
			} `json:"aggregates"`
		} `json:"consumers"`
	}
	seen := map[string]bool{}
	q := url.Values{"consumer": {consumer}}
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("the pages of /api/parked do not end")
		}
		code, body := get(t, con.base+"/api/parked?"+q.Encode(), nil)
		var p page
		if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil || len(p.Consumers) != 1 || p.Consumers[0].Count != n {
			t.Fatalf("GET /api/parked?%s: %d %v %.500s", q.Encode(), code, err, body)
		}
		c := p.Consumers[0]
		k := 0
		for _, a := range c.Aggregates {
			if a.Aggregate == "agg-big" {
				if !a.More || len(a.Messages) != 200 || len(c.Aggregates) != 1 {
					t.Errorf("page %d: agg-big alone %v, with %d messages and more %v; want alone, 200 and more", pages, len(c.Aggregates) == 1, len(a.Messages), a.More)
				}
			} else if len(a.Messages) != 5 || a.More {
				t.Errorf("page %d: aggregate %s with %d messages (more %v), want its 5", pages, a.Aggregate, len(a.Messages), a.More)
			}
			for _, m := range a.Messages {
				if seen[m.MessageID] || m.Body != "" {
					t.Errorf("page %d: message %s listed again, or with its body", pages, m.MessageID)
				}
				seen[m.MessageID] = true
				k++
			}
		}
		if k == 0 || k > 200 {
			t.Fatalf("page %d: %d messages, want 1 to 200", pages, k)
		}
		if !c.More {
			break
		}
		q.Set("after", c.Next)
	}
	if len(seen) != n-big+200 {
		t.Errorf("paging listed %d messages, want %d", len(seen), n-big+200)
	}

	// Paging through the outbox, each listing by its own cursor: each
	// row once, in the listing of its state, without its payload.
	type outboxPage struct {
		Quarantined []struct {
			RowID int64  `json:"row_id"`
			State string `json:"state"`
		} `json:"quarantined"`
		Pending []struct {
			RowID int64  `json:"row_id"`
			State string `json:"state"`
		} `json:"pending"`
		Next        int64 `json:"next"`
		PendingNext int64 `json:"pending_next"`
	}
	for _, l := range []struct {
		state, cursor string
		want          int
	}{{"quarantined", "after", 1000}, {"pending", "pending_after", 500}} {
		listed := map[int64]bool{}
		q := url.Values{}
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("the pages of /api/outbox's %s rows do not end", l.state)
			}
			code, body := get(t, con.base+"/api/outbox?"+q.Encode(), nil)
			var p outboxPage
			if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil || strings.Contains(body, "pppppppp") {
				t.Fatalf("GET /api/outbox?%s: %d %v %.500s", q.Encode(), code, err, body)
			}
			rows, next := p.Quarantined, p.Next
			if l.state == "pending" {
				rows, next = p.Pending, p.PendingNext
			}
			if len(rows) == 0 || len(rows) > 200 {
				t.Fatalf("GET /api/outbox?%s: %d %s rows, want 1 to 200", q.Encode(), len(rows), l.state)
			}
			for _, r := range rows {
				if r.State != l.state || listed[r.RowID] {
					t.Errorf("GET /api/outbox?%s: row %d (%s) listed again, or among the %s rows", q.Encode(), r.RowID, r.State, l.state)
				}
				listed[r.RowID] = true
			}
			if next == 0 {
				break
			}
			q.Set(l.cursor, strconv.FormatInt(next, 10))
		}
		if len(listed) != l.want {
			t.Errorf("paging listed %d %s rows, want %d", len(listed), l.state, l.want)
		}
	}
}
