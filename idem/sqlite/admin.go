package sqlite

import (
	"context"
	"database/sql"

	"github.com/wary-go/wary/idem/store"
)

// ParkedConsumers implements [store.Admin]: every consumer with parked
// messages, and how many.
func (s *Store) ParkedConsumers(ctx context.Context) (map[string]int, error) {
	return s.core.ParkedConsumers(ctx)
}

// Unclaim implements [store.Admin]: it forgets, in tx, that consumer
// processed messageID (and its failed attempts).
func (s *Store) Unclaim(ctx context.Context, tx *sql.Tx, consumer, messageID string) (bool, error) {
	return s.core.Unclaim(ctx, tx, consumer, messageID)
}

var _ store.Admin[*sql.Tx] = (*Store)(nil)
