package admin

import (
	"context"
	"time"

	"github.com/wary-go/wary/idem/keys"
)

// Keys lists the idempotency keys f selects, oldest first.
func (a *Admin) Keys(ctx context.Context, f keys.Filter) ([]keys.Record, error) {
	if f.At.IsZero() {
		f.At = time.Now()
	}
	return a.d.listKeys(ctx, f)
}
