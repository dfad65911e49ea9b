package sqlcore

import (
	"context"
	"fmt"
)

// ParkedConsumers implements the operator's part.
func (c *Core[Tx]) ParkedConsumers(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := c.inTx(ctx, func(q Querier) error {
		rows, err := q.Query(ctx, c.render(`SELECT consumer, COUNT(*) FROM {{parked}} GROUP BY consumer`))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				return err
			}
			out[name] = int(n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("parked consumers: %w", err)
	}
	return out, nil
}

// Unclaim implements the operator's part.
func (c *Core[Tx]) Unclaim(ctx context.Context, tx Tx, consumer, messageID string) (bool, error) {
	q := c.b.Q(tx)
	n, err := q.Exec(ctx, c.render(`DELETE FROM {{inbox}} WHERE consumer = $1 AND message_id = $2`), consumer, messageID)
	if err != nil {
		return false, fmt.Errorf("unclaim: %w", err)
	}
	if _, err := q.Exec(ctx, c.q.clearFailure, consumer, messageID); err != nil {
		return false, fmt.Errorf("unclaim: %w", err)
	}
	return n > 0, nil
}
