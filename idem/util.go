package idem

import (
	"context"
	"fmt"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
)

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// driverOf returns p's driver, or an error if there is none.
func driverOf[Tx any](p store.Provider[Tx]) (store.Driver[Tx], error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil store", broker.ErrInvalid)
	}
	d := p.Driver()
	if d == nil {
		return nil, fmt.Errorf("%w: the store %T has no driver", broker.ErrInvalid, p)
	}
	return d, nil
}
