package testkit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wary-go/wary/idem"
)

// Count reads how many times each effect happened, by key (a message ID,
// an order ID, a payment key): Kit.CountRows counts the rows of a query on
// the kit's database; a test's own Count reads any record it keeps of
// effects outside it.
type Count func(ctx context.Context) (map[string]int, error)

// CountRows returns a Count that runs query, in the dialect of the kit's
// store, on its database and counts the rows by their first column, read
// as text:
//
//	kit.CountRows(`SELECT message_id FROM billing_effects`)
func (k *Kit[Tx]) CountRows(query string, args ...any) Count {
	return func(ctx context.Context) (map[string]int, error) {
		rows, err := k.query(ctx, query, args...)
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
// after it, whether the message is parked, held as an early event (a gap
// that never closed) or dead-lettered, the handler's last error.
func (k *Kit[Tx]) AssertOnce(t testing.TB, count Count, keys ...string) {
	t.Helper()
	got, err := count(t.Context())
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
	parked, err := k.inbox.Parked(t.Context(), idem.ParkedFilter{})
	if err != nil {
		t.Errorf("testkit: list the park: %v", err)
	}
	early, err := k.early(t.Context(), parked)
	if err != nil {
		t.Errorf("testkit: read the early events: %v", err)
	}
	expected := map[string]bool{}
	for _, key := range want {
		expected[key] = true
		if n := got[key]; n != 1 {
			t.Errorf("testkit: effect %q happened %s, want once%s", key, times(n), k.why(key, n, parked, early))
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
		t.Errorf("testkit: effect %q happened %s, want none (not an expected key)%s", key, times(got[key]), k.why(key, got[key], parked, early))
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
func (k *Kit[Tx]) why(key string, n int, parked []idem.Parked, early []Early) string {
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
		for _, e := range early {
			if e.MessageID == id {
				why = append(why, "it is "+e.String())
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

// AssertRows fails t unless query, run on the kit's database (in its
// store's dialect), returns the rows want, in order, each row's columns as
// text joined by single spaces (NULL for a null):
//
//	kit.AssertRows(t, `SELECT id, status FROM orders ORDER BY id`, "order-1 confirmed", "order-2 placed")
//
// It checks the final state, where a stale event applied over newer state
// shows.
func (k *Kit[Tx]) AssertRows(t testing.TB, query string, want ...string) {
	t.Helper()
	rows, err := k.query(t.Context(), query)
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

// early returns the messages the inbox holds as early events now: those
// it held (idem.ResultEarly), neither parked since nor applied (their
// aggregate's version in the state table of Options.Versions is below
// theirs).
func (k *Kit[Tx]) early(ctx context.Context, parked []idem.Parked) ([]Early, error) {
	var held []string
	for _, id := range k.ids {
		if k.messages[id].early && !slices.ContainsFunc(parked, func(p idem.Parked) bool { return p.MessageID == id }) {
			held = append(held, id)
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	v := k.opts.Versions
	rows, err := k.query(ctx, fmt.Sprintf("SELECT %s, %s FROM %s", v.IDColumn, v.VersionColumn, v.Table))
	if err != nil {
		return nil, err
	}
	applied := map[string]int64{}
	for _, r := range rows {
		n, err := strconv.ParseInt(r[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s.%s of %q: %w", v.Table, v.VersionColumn, r[0], err)
		}
		applied[r[0]] = n
	}
	var out []Early
	for _, id := range held {
		t := k.messages[id]
		if a := applied[t.aggregate]; a < t.version {
			out = append(out, Early{MessageID: id, AggregateID: t.aggregate, Version: t.version, Applied: a})
		}
	}
	return out, nil
}
