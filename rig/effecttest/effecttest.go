// Package effecttest is an idem inbox on SQLite whose business effect is a
// row per message ID, for the drivers' fault tests: they record in a
// conformance.History what they sent, what the broker delivered and, from
// the committed rows, what was applied, and check that nothing was lost
// and no effect was applied twice.
package effecttest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

// Effects is an inbox store on SQLite (in the test's temporary folder)
// with the table effects (id), and the history it records into.
type Effects struct {
	store *sqlite.Store
	h     *conformance.History
}

// New opens the store, closed when the test ends.
func New(t testing.TB, h *conformance.History) *Effects {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "inbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.DB().ExecContext(ctx, "CREATE TABLE effects (id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return &Effects{store: st, h: h}
}

// Handler returns the handler of an inbox named name for a subscription
// with these capabilities: it records each delivery in the history, and
// the inbox inserts the message's row in its own transaction.
func (e *Effects) Handler(t testing.TB, name string, caps capability.Subscription) broker.Handler {
	t.Helper()
	in, err := idem.NewInbox[*sql.Tx](e.store, name, caps, nil)
	if err != nil {
		t.Fatal(err)
	}
	ih := in.Wrap(func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (id) VALUES (?)", d.Message.ID)
		return err
	})
	return func(ctx context.Context, d *broker.Delivery) error {
		e.h.Delivered(d.Message.ID)
		return ih(ctx, d)
	}
}

// Count returns how many distinct message IDs have an effect.
func (e *Effects) Count(t testing.TB) int {
	t.Helper()
	var n int
	if err := e.store.DB().QueryRow("SELECT COUNT(DISTINCT id) FROM effects").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Applied copies the committed effects into the history (once per row, so
// a twice-applied effect shows) and returns how many distinct IDs have one.
// Call it once, after the consumers have stopped.
func (e *Effects) Applied(t testing.TB) int {
	t.Helper()
	rows, err := e.store.DB().Query("SELECT id, COUNT(*) FROM effects GROUP BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			t.Fatal(err)
		}
		for range c {
			e.h.Applied(id)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// WaitCount waits until n distinct IDs have an effect, looking every 20 ms
// (the inbox's commits give no signal), and fails t if ctx ends first, or
// if runDone (when not nil) yields first: the consumer stopped.
func (e *Effects) WaitCount(ctx context.Context, t testing.TB, n int, runDone <-chan error) {
	t.Helper()
	for e.Count(t) < n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d effects applied: %s", e.Count(t), n, e.h.Check())
		case err := <-runDone:
			t.Fatalf("the consumer stopped with %d of %d effects applied: %v", e.Count(t), n, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
