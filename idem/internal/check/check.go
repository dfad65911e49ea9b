// Package check is what idem's packages share to check what they are
// given: options (Options), a store (Part) and outbox messages.
package check

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/seam"
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

// Part returns the part I of p's implementation that a constructor calls
// (one of the unexported interfaces idem's packages declare), or an error
// matching broker.ErrInvalid if there is no store or it lacks a method of
// I; what names the part.
func Part[I, Tx any](p seam.Provider[Tx], what string) (I, error) {
	var i I
	if p == nil {
		return i, fmt.Errorf("%w: nil store", broker.ErrInvalid)
	}
	impl := p.Driver().Impl()
	if impl == nil {
		return i, fmt.Errorf("%w: the store %T has no driver", broker.ErrInvalid, p)
	}
	i, ok := impl.(I)
	if !ok {
		return i, fmt.Errorf("%w: the store %T does not implement %s", broker.ErrInvalid, p, what)
	}
	return i, nil
}
