package idem

import (
	"github.com/wary-go/wary/idem/store"
)

// Conversions between the types of this package and the stores' (package
// idem/store), at the boundary between the two. The struct types whose
// fields are all of basic types convert directly (Parked(p)).

func outboxRow(r store.OutboxRow) OutboxRow {
	return OutboxRow{OutboxMessage: OutboxMessage(r.OutboxMessage), RowID: r.RowID, Sequence: r.Sequence,
		State: OutboxState(r.State), CreatedAt: r.CreatedAt, Attempts: r.Attempts, NextAttempt: r.NextAttempt,
		LastError: r.LastError, SentAt: r.SentAt}
}

func outboxRows(rs []store.OutboxRow) []OutboxRow {
	out := make([]OutboxRow, len(rs))
	for i, r := range rs {
		out[i] = outboxRow(r)
	}
	return out
}

func parkedList(ps []store.Parked) []Parked {
	out := make([]Parked, len(ps))
	for i, p := range ps {
		out[i] = Parked(p)
	}
	return out
}

func versionCheck(c store.VersionCheck) VersionCheck {
	return VersionCheck{Result: VersionResult(c.Result), Current: c.Current}
}
