package outbox

import "github.com/wary-go/wary/idem/store"

// Conversions between this package's types and the stores' (idem/store).

func row(r store.OutboxRow) Row {
	return Row{Message: Message(r.OutboxMessage), RowID: r.RowID, Sequence: r.Sequence,
		State: State(r.State), CreatedAt: r.CreatedAt, Attempts: r.Attempts, NextAttempt: r.NextAttempt,
		LastError: r.LastError, SentAt: r.SentAt}
}

func rows(rs []store.OutboxRow) []Row {
	out := make([]Row, len(rs))
	for i, r := range rs {
		out[i] = row(r)
	}
	return out
}
