package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wary-go/wary/idem/admin"
)

// The audit log is the record of operator actions, in a table of its own
// next to the store's (PREFIXoperator_audit, see idem/admin), which the
// console creates when it starts; once it exists, the commands that change
// the store (parked replay and discard, outbox requeue and discard) record
// their actions in it too.

// audited records what a command did in the audit table, where the
// console created one (a command never creates it); a failure to record
// is said on stderr, since the action is done.
func (a *app) audited(ctx context.Context, d *db, action, what string, n int) {
	err := d.Record(ctx, admin.AuditEntry{Who: operator() + " via wary " + action, Action: action, What: what, Count: n})
	if err != nil && !errors.Is(err, admin.ErrNoAudit) {
		fmt.Fprintf(a.io.Err, "note: done, but the audit log did not record it: %s\n", redactErr(err))
	}
}

// record records e in the audit log, which the console created.
func (con *console) record(ctx context.Context, e admin.AuditEntry) error {
	if err := con.db.Record(ctx, e); err != nil {
		return fmt.Errorf("audit log: %s", redactErr(err))
	}
	return nil
}

// quoteAll quotes each name, as Go does (strconv.Quote), and joins them:
// in the audit log "a, b" is one name and "a", "b" two, and a newline or a
// terminal escape in a name is written escaped.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
