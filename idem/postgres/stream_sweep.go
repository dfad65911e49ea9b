package postgres

import "context"

// The sweeps of a clean stream. A sweep claims from the table only while
// nothing streamed is live (sweep): once one is due the lanes dispatch
// nothing until every window in flight has landed, its confirms and its
// DELETE included. While the table is clear (Clear: no quarantined row, no
// pending row that failed, was requeued or is for the claims only) and the
// loop left nothing there (not dirty), a claim can find only rows the
// stream has in flight or is about to bring, which it must not take
// (nothing else leaves a plain pending row behind the slot's position:
// the stream settles each row it passes, deleted or for the claims only,
// before it confirms past it). So the sweep that comes every sweepEvery
// PollIntervals anyway asks Clear first, while the windows fly: still
// clear, it is done, and the lanes never stop for it (a backlog drained
// with a short PollInterval stopped every few hundred rows, each stop a
// claim query that walked the backlog's aggregates). Not clear (a row
// another process failed, requeued or moved), the windows are checked from
// then on and the sweep goes as before. A streamed row that Settle's
// DELETE did not find within its waits (one deleted already, in a window
// streamed again after a crash; or one whose commit is in the log but not
// yet visible, as under synchronous replication waiting for a slow
// standby) makes the loop dirty: the next sweep claims, and publishes it
// again if it became visible since.

// quietSweep reports whether the sweep due now is only the periodic one
// of a clean stream and the table is still clear: it is then done
// without stopping the lanes. Otherwise the sweep goes (and, if Clear
// found the table not clear, the windows to come are checked).
func (l *streamLoop) quietSweep(ctx context.Context) bool {
	if !l.clean || l.dirty || l.sweepDue || l.verifyDue {
		return false
	}
	clear, err := l.st.Clear(ctx)
	switch {
	case ctx.Err() != nil:
		return false // the stream ends
	case err != nil:
		l.s.c.Note("sweep", err)
		l.sweepDue = true // the sweep goes, without asking again
		return false
	case !clear:
		l.unclean()
		return false
	}
	l.swept = l.s.c.Now()
	return true
}
