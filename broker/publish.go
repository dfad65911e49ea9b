package broker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// sendWithRetry sends batch, and sends again what failed for a transient
// reason (ErrRetryable) up to the retry policy's attempts: the whole batch
// when it failed as a whole, only its failed messages when the driver said
// which were accepted (those are not sent twice). A message that any
// attempt may have delivered stays "may have been sent" whatever a later
// attempt says of it.
func (t *Topic) sendWithRetry(ctx context.Context, batch []*driver.Message) error {
	todo := batch
	var at []int // at[i]: todo[i]'s index in batch, made on the first failure
	var (
		outcome []error // per message of batch, once an attempt told them apart
		maybe   []bool  // per message of batch: an attempt may have delivered it
	)
	for attempt := 1; ; attempt++ {
		var werr *Error
		var raw error
		if raw = ctx.Err(); raw == nil {
			raw = t.d.SendBatch(ctx, todo)
		}
		if raw != nil {
			if at == nil {
				at = make([]int, len(batch))
				for i := range at {
					at[i] = i
				}
			}
			werr = wrapErr("publish", t.d.Classify, raw).(*Error)
			if maybe == nil {
				maybe = make([]bool, len(batch))
			}
			for i, j := range at {
				var me *Error
				switch {
				case werr.Messages == nil:
					maybe[j] = maybe[j] || werr.MaybeSent
				case errors.As(werr.Messages[i], &me):
					maybe[j] = maybe[j] || me.MaybeSent
				}
			}
		}
		if outcome != nil || (werr != nil && werr.Messages != nil) {
			if outcome == nil {
				outcome = make([]error, len(batch))
			}
			for i, j := range at {
				switch {
				case werr == nil:
					outcome[j] = nil
				case werr.Messages != nil:
					outcome[j] = werr.Messages[i]
				default:
					outcome[j] = werr
				}
			}
		}
		if werr == nil && outcome == nil {
			return nil
		}
		if werr == nil || !retryable(werr) || attempt >= t.retry.Attempts {
			return batchOutcome(werr, outcome, maybe)
		}
		if outcome != nil { // send again only what failed
			todo, at = todo[:0:0], at[:0:0]
			for j, e := range outcome {
				if e != nil {
					todo, at = append(todo, batch[j]), append(at, j)
				}
			}
		}
		delay := t.retry.Backoff.Delay(attempt)
		t.logger.LogAttrs(ctx, slog.LevelWarn, "wary: publish failed, retrying",
			slog.Int("attempt", attempt), slog.Int("messages", len(todo)), slog.Duration("delay", delay), slog.String("error", raw.Error()))
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			werr.err = errors.Join(raw, ctx.Err())
			return batchOutcome(werr, outcome, maybe)
		case <-t.closing:
			timer.Stop()
			return batchOutcome(werr, outcome, maybe)
		case <-timer.C:
		}
	}
}

// retryable reports whether a failed send is worth sending again: it
// failed as a whole for a transient reason, or every message that failed
// did (or was not attempted because of one that did).
func retryable(e *Error) bool {
	if e.Messages == nil {
		return e.code == driver.Unavailable
	}
	return !slices.ContainsFunc(e.Messages, func(m error) bool {
		var me *Error
		return m != nil && errors.As(m, &me) && me.code != driver.Unavailable && !errors.Is(m, driver.ErrNotAttempted)
	})
}

// batchOutcome is the error of a batch after its last attempt, last: with
// outcome (per message, over every attempt) when the attempts told the
// messages apart, nil when every message was accepted in the end. A
// message that maybe says an attempt may have delivered is reported as
// may have been sent.
func batchOutcome(last *Error, outcome []error, maybe []bool) error {
	if outcome == nil {
		if slices.Contains(maybe, true) {
			last.MaybeSent = true
		}
		return last
	}
	if !slices.ContainsFunc(outcome, func(e error) bool { return e != nil }) {
		return nil
	}
	for j, e := range outcome {
		var me *Error
		if e != nil && maybe[j] && errors.As(e, &me) && !me.MaybeSent {
			outcome[j] = newError(me.Op, me.code, true, me.err)
		}
	}
	out := newError("publish", driver.Unknown, false, last.err)
	out.Messages = outcome
	out.summarize()
	return out
}

// notSent is why a message of a Publish was not sent though nothing was
// wrong with it; it matches driver.ErrNotAttempted.
type notSent string

func (e notSent) Error() string { return "not sent: " + string(e) }
func (notSent) Unwrap() error   { return driver.ErrNotAttempted }

var (
	// errEarlierBatch is the outcome of the messages of a Publish after a
	// batch that failed.
	errEarlierBatch = newError("publish", driver.Unknown, false, notSent("an earlier batch of the call failed"))
	// errOtherRefused is the outcome of the valid messages of a Publish
	// that refused others before sending.
	errOtherRefused = newError("publish", driver.Unknown, false, notSent("another message of the call was refused"))
)

// validateAll checks msgs before anything is sent. When one is invalid
// and there are others, the error's Messages holds each refused message's
// own error and errOtherRefused for the rest, and its class is the first
// refused one's.
func validateAll(caps capability.Topic, msgs []*Message) error {
	var out *Error
	for i, m := range msgs {
		err := validate(caps, m)
		if err == nil {
			continue
		}
		if len(msgs) == 1 {
			return err
		}
		if out == nil {
			out = newError("publish", driver.Unknown, false, err)
			out.Messages = make([]error, len(msgs))
			for j := range out.Messages {
				out.Messages[j] = errOtherRefused
			}
		}
		out.Messages[i] = err
	}
	if out == nil {
		return nil
	}
	out.summarize()
	return out
}

// placeMessages sets be.Messages for a Publish of n messages whose batch
// [start, end) failed with be, the batches before it accepted: nil for
// those, the batch's own per-message errors (or be itself for each of its
// messages when the driver did not tell them apart), and errEarlierBatch
// for the rest.
func placeMessages(be *Error, n, start, end int) {
	msgs := make([]error, n)
	own := newError(be.Op, be.code, be.MaybeSent, be.err) // the batch's error, before the earlier batches count
	for i := start; i < end; i++ {
		if be.Messages != nil {
			msgs[i] = be.Messages[i-start]
		} else {
			msgs[i] = own
		}
	}
	for i := end; i < n; i++ {
		msgs[i] = errEarlierBatch
	}
	if start > 0 {
		be.MaybeSent = true
	}
	be.Messages = msgs
}
