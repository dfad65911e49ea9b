package testkit

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wary-go/wary/idem"
)

// Count reads how many times each effect happened, by key (a message ID,
// an order ID, a payment key). It reads the kit's database, or any record
// the test keeps of effects outside it.
type Count func(ctx context.Context, db *sql.DB) (map[string]int, error)

// CountRows returns a Count that runs query on the kit's database and
// counts its rows by their first column, read as text:
//
//	testkit.CountRows(`SELECT message_id FROM billing_effects`)
func CountRows(query string, args ...any) Count {
	return func(ctx context.Context, db *sql.DB) (map[string]int, error) {
		rows, err := queryText(ctx, db, query, args...)
		if err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, r := range rows {
			n[r[0]]++
		}
		return n, nil
	}
}

// AssertOnce fails t for each effect that count does not report exactly
// once: one of keys, or, with no keys, one for each message ID given to Run
// (an effects table keyed by message ID). A key count reports that is not
// expected fails t too. Each failure says what the kit saw of the message
// (or of the aggregate's messages, for a key that is an aggregate ID): how
// often the handler succeeded and whether a transaction was rolled back
// after it, whether the message is parked or dead-lettered, the handler's
// last error.
func (k *Kit) AssertOnce(t testing.TB, count Count, keys ...string) {
	t.Helper()
	got, err := count(t.Context(), k.DB())
	if err != nil {
		t.Errorf("testkit: count the effects: %v", err)
		return
	}
	want := keys
	if len(want) == 0 {
		want = k.ids
	}
	if len(want) == 0 {
		t.Errorf("testkit: AssertOnce with no keys before any Run: nothing to check")
		return
	}
	var parked []idem.Parked
	if k.inbox != nil {
		parked, _ = k.inbox.Parked(t.Context(), idem.ParkedFilter{})
	}
	expected := map[string]bool{}
	for _, key := range want {
		expected[key] = true
		if n := got[key]; n != 1 {
			t.Errorf("testkit: effect %q happened %s, want once%s", key, times(n), k.why(key, n, parked))
		}
	}
	var extra []string
	for key := range got {
		if !expected[key] && got[key] > 0 {
			extra = append(extra, key)
		}
	}
	slices.Sort(extra)
	for _, key := range extra {
		t.Errorf("testkit: effect %q happened %s, want none (not an expected key)%s", key, times(got[key]), k.why(key, got[key], parked))
	}
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// why says what the kit saw of the message key, or of the messages of the
// aggregate key.
func (k *Kit) why(key string, n int, parked []idem.Parked) string {
	var ids []string
	if k.messages[key] != nil {
		ids = []string{key}
	} else {
		for _, id := range k.ids {
			if k.messages[id].aggregate == key {
				ids = append(ids, id)
			}
		}
	}
	var notes []string
	for _, id := range ids {
		t := k.messages[id]
		var why []string
		switch {
		case t.rolledBack > 0 && t.succeeded > 1 && n > 1:
			why = append(why, fmt.Sprintf("the handler succeeded %d times, and the kit rolled back %d of those transactions (the crash before commit): "+
				"an effect written outside the transaction it is given stays when the transaction rolls back", t.succeeded, t.rolledBack))
		case t.succeeded == 1 && n > 1:
			why = append(why, "the handler succeeded once: it writes the effect more than once itself, or the count reads more than the effect")
		case t.succeeded > 0:
			why = append(why, fmt.Sprintf("the handler succeeded %d times (%d rolled back by the injected crash before commit)", t.succeeded, t.rolledBack))
		default:
			why = append(why, "the handler never succeeded")
		}
		for _, p := range parked {
			if p.MessageID == id {
				why = append(why, fmt.Sprintf("it is parked (%s): replay it with Kit.Inbox().Replay", p.Reason))
			}
		}
		if t.dead != "" {
			why = append(why, "it was dead-lettered: "+t.dead)
		} else if t.lastErr != nil {
			why = append(why, fmt.Sprintf("the handler's last error (attempt %d): %v", t.lastAttempt, t.lastErr))
		}
		notes = append(notes, fmt.Sprintf("\n\tmessage %s: %s", id, strings.Join(why, "; ")))
	}
	return strings.Join(notes, "")
}

// AssertRows fails t unless query, run on the kit's database, returns the
// rows want, in order, each row's columns as text joined by single spaces
// (NULL for a null):
//
//	kit.AssertRows(t, `SELECT id, status FROM orders ORDER BY id`, "order-1 confirmed", "order-2 placed")
//
// It checks the final state, where a stale event applied over newer state
// shows.
func (k *Kit) AssertRows(t testing.TB, query string, want ...string) {
	t.Helper()
	rows, err := queryText(t.Context(), k.DB(), query)
	if err != nil {
		t.Errorf("testkit: %s: %v", query, err)
		return
	}
	got := make([]string, len(rows))
	for i, r := range rows {
		got[i] = strings.Join(r, " ")
	}
	if !slices.Equal(got, want) {
		t.Errorf("testkit: %s\nreturned:\n\t%s\nwant:\n\t%s", query, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// queryText runs query and returns its rows, each column as text.
func queryText(ctx context.Context, db *sql.DB, query string, args ...any) ([][]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("the query returns no column")
	}
	var out [][]string
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				row[i] = "NULL"
			case []byte:
				row[i] = string(v)
			default:
				row[i] = fmt.Sprint(v)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}
