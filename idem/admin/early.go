package admin

import (
	"context"

	"github.com/wary-go/wary/idem"
)

// Early lists the aggregates that hold early events, of consumer or
// (consumer "") of every consumer, oldest hold first, at most limit of
// them (0: all). It changes nothing.
func (a *Admin) Early(ctx context.Context, consumer string, limit int) ([]idem.EarlyAggregate, error) {
	return a.d.listEarly(ctx, consumer, limit)
}
