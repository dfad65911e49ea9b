// Package check is what idem's packages share to check what they are
// given: options (Options) and a store's driver (Driver).
package check

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/store"
)

// Options collects what is wrong with an options struct, so that a
// constructor refuses it at once (broker.ErrInvalid) instead of running
// with a negative interval (a busy loop) or a negative timeout (nothing
// ever done). Zero means the default everywhere; only the fields whose
// documentation gives negative values a meaning (PurgeInterval: never)
// accept them.
type Options struct {
	// What names the options in the error ("relay options").
	What string
	errs []error
}

// Bad records that the field name is wrong, and why.
func (c *Options) Bad(name, why string) {
	c.errs = append(c.errs, fmt.Errorf("%s %s", name, why))
}

// Duration refuses a negative d, unless negOK.
func (c *Options) Duration(name string, d time.Duration, negOK bool) {
	if d < 0 && !negOK {
		c.Bad(name, "is negative")
	}
}

// Count refuses a negative n.
func (c *Options) Count(name string, n int) {
	if n < 0 {
		c.Bad(name, "is negative")
	}
}

// Backoff refuses negative durations, a ceiling below the first delay and a
// multiplier that is negative or not a finite number.
func (c *Options) Backoff(name string, b broker.Backoff) {
	c.Duration(name+".Initial", b.Initial, false)
	c.Duration(name+".Max", b.Max, false)
	if b.Initial > 0 && b.Max > 0 && b.Max < b.Initial {
		c.Bad(name+".Max", "is below Initial")
	}
	if m := b.Multiplier; m < 0 || math.IsNaN(m) || math.IsInf(m, 0) {
		c.Bad(name+".Multiplier", "is negative or not a finite number")
	}
}

// Err returns the collected problems as one error matching
// broker.ErrInvalid, or nil.
func (c *Options) Err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", broker.ErrInvalid, c.What, errors.Join(c.errs...))
}

// Driver returns p's driver, or an error matching broker.ErrInvalid if
// there is none.
func Driver[Tx any](p store.Provider[Tx]) (store.Driver[Tx], error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil store", broker.ErrInvalid)
	}
	d := p.Driver()
	if d == nil {
		return nil, fmt.Errorf("%w: the store %T has no driver", broker.ErrInvalid, p)
	}
	return d, nil
}
