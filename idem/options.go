package idem

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wary-go/wary/broker"
)

// optionCheck collects what is wrong with an options struct, so that a
// constructor refuses it at once (broker.ErrInvalid) instead of running
// with a negative interval (a busy loop) or a negative timeout (nothing
// ever done). Zero means the default everywhere; only the fields whose
// documentation gives negative values a meaning (PurgeInterval: never)
// accept them.
type optionCheck struct {
	what string
	errs []error
}

func (c *optionCheck) bad(name, why string) {
	c.errs = append(c.errs, fmt.Errorf("%s %s", name, why))
}

// duration refuses a negative d, unless negOK.
func (c *optionCheck) duration(name string, d time.Duration, negOK bool) {
	if d < 0 && !negOK {
		c.bad(name, "is negative")
	}
}

// count refuses a negative n.
func (c *optionCheck) count(name string, n int) {
	if n < 0 {
		c.bad(name, "is negative")
	}
}

// backoff refuses negative durations, a ceiling below the first delay and a
// multiplier that is negative or not a finite number.
func (c *optionCheck) backoff(name string, b broker.Backoff) {
	c.duration(name+".Initial", b.Initial, false)
	c.duration(name+".Max", b.Max, false)
	if b.Initial > 0 && b.Max > 0 && b.Max < b.Initial {
		c.bad(name+".Max", "is below Initial")
	}
	if m := b.Multiplier; m < 0 || math.IsNaN(m) || math.IsInf(m, 0) {
		c.bad(name+".Multiplier", "is negative or not a finite number")
	}
}

// err returns the collected problems as one error matching
// broker.ErrInvalid, or nil.
func (c *optionCheck) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", broker.ErrInvalid, c.what, errors.Join(c.errs...))
}
