package outbox

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem/internal/failpoint"
	"github.com/wary-go/wary/idem/internal/seam"
)

type pubResult struct {
	sent    []int64
	failed  []seam.OutboxFailure
	crashed error
	fatal   error
}

// publishBatch publishes a claimed batch (each aggregate's rows in
// sequence order, aggregates one after the other) with one Publish call,
// so that the driver keeps the whole batch in flight (RabbitMQ: confirms
// outstanding on one channel; Kafka: one produce of all records). If that
// fails, the error does not say which messages went through: the batch is
// published again aggregate by aggregate (Concurrency at a time), each
// aggregate's rows one after the other, stopping at its first failure, so
// that a failed row's later rows are not marked sent. Rows before the
// failure were perhaps already delivered by the first attempt, and rows
// after it perhaps too: see the package documentation for what a consumer
// may then see.
//
// A row the store could not decode, or that breaks Add's rules
// (Row.Invalid), is not published: it fails for good at once,
// and its aggregate's later rows in the batch are held back, as behind a
// publish that failed; the other aggregates' rows go on.
func (r *Relay) publishBatch(ctx context.Context, rows []Row) pubResult {
	var res pubResult
	rows, res.failed = r.invalid(rows)
	if len(rows) > 1 {
		msgs := make([]*broker.Message, len(rows))
		for i := range rows {
			msgs[i] = rowMessage(&rows[i])
		}
		spans := make([]relaySpan, len(rows))
		start := time.Now()
		for i := range rows {
			_, spans[i] = r.tel.startPublish(ctx, &rows[i], start)
		}
		pctx, cancel := context.WithTimeout(ctx, r.o.PublishTimeout)
		err := r.topic.Publish(pctx, msgs...)
		cancel()
		end, now := time.Now(), r.o.Now()
		for i := range rows {
			r.tel.endPublish(ctx, spans[i], &rows[i], end, now, err)
		}
		switch {
		case err == nil:
			after := failpoint.AfterPublish(ctx)
			for i, m := range msgs {
				if after != nil {
					if herr := after(m); herr != nil {
						res.crashed = herr
						return res
					}
				}
				res.sent = append(res.sent, rows[i].RowID)
			}
			return res
		case ctx.Err() != nil:
			return res // stopping: nothing is marked
		case errors.Is(err, broker.ErrClosed):
			res.fatal = err
			return res
		}
	}
	var groups [][]Row // each aggregate's rows, in order (a streamed window interleaves them)
	at := map[string]int{}
	for _, row := range rows {
		g, ok := at[row.AggregateID]
		if !ok {
			g = len(groups)
			at[row.AggregateID] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], row)
	}
	var (
		mu   sync.Mutex
		stop atomic.Bool
		next atomic.Int64
		wg   sync.WaitGroup
	)
	work := func() {
		for {
			g := int(next.Add(1) - 1)
			if g >= len(groups) {
				return
			}
			r.publishGroup(ctx, groups[g], &stop, &mu, &res)
		}
	}
	if n := min(r.o.Concurrency, len(groups)); n > 1 {
		for range n {
			wg.Go(work)
		}
		wg.Wait()
	} else {
		work() // one aggregate (a trickle's one-row window): no goroutine to start and wait for
	}
	return res
}

// invalid takes the rows that cannot be published (Invalid) out of rows,
// with their aggregates' later rows, and returns the others and the
// failures of those that cannot be published.
func (r *Relay) invalid(rows []Row) ([]Row, []seam.OutboxFailure) {
	var failed []seam.OutboxFailure
	var held map[string]struct{}
	for i := range rows {
		if rows[i].Invalid != nil {
			if held == nil {
				held = map[string]struct{}{}
			}
			held[rows[i].AggregateID] = struct{}{}
		}
	}
	if held == nil {
		return rows, nil
	}
	keep := make([]Row, 0, len(rows))
	stopped := make(map[string]struct{}, len(held))
	for i := range rows {
		row := &rows[i]
		if _, ok := held[row.AggregateID]; !ok {
			keep = append(keep, *row)
			continue
		}
		if _, ok := stopped[row.AggregateID]; ok {
			continue // behind a row that cannot be published
		}
		if row.Invalid == nil {
			keep = append(keep, *row) // before it
			continue
		}
		stopped[row.AggregateID] = struct{}{}
		failed = append(failed, r.failure(row, row.Invalid))
	}
	return keep, failed
}

// publishGroup publishes one aggregate's rows in order, stopping at the
// first failure.
func (r *Relay) publishGroup(ctx context.Context, rows []Row, stop *atomic.Bool, mu *sync.Mutex, res *pubResult) {
	for i := range rows {
		row := &rows[i]
		if stop.Load() || ctx.Err() != nil {
			return
		}
		m := rowMessage(row)
		pctx, cancel := context.WithTimeout(ctx, r.o.PublishTimeout)
		pctx, ps := r.tel.startPublish(pctx, row, time.Now())
		err := r.topic.Publish(pctx, m)
		r.tel.endPublish(pctx, ps, row, time.Now(), r.o.Now(), err)
		cancel()
		if after := failpoint.AfterPublish(ctx); err == nil && after != nil {
			if herr := after(m); herr != nil {
				stop.Store(true)
				mu.Lock()
				res.crashed = herr
				mu.Unlock()
				return
			}
		}
		mu.Lock()
		if err == nil {
			res.sent = append(res.sent, row.RowID)
			mu.Unlock()
			continue
		}
		switch {
		case ctx.Err() != nil:
			// Stopping: not the row's fault.
		case errors.Is(err, broker.ErrClosed):
			stop.Store(true)
			res.fatal = err
		default:
			res.failed = append(res.failed, r.failure(row, err))
		}
		mu.Unlock()
		return
	}
}

// failure decides what a failed publish of row means: back off, or
// quarantine.
func (r *Relay) failure(row *Row, err error) seam.OutboxFailure {
	attempts := row.Attempts + 1
	permanent := errors.Is(err, broker.ErrTooLarge) || errors.Is(err, broker.ErrInvalid) || errors.Is(err, ErrInvalidMessage) || broker.IsPermanent(err)
	f := seam.OutboxFailure{RowID: row.RowID, Error: err.Error(), Quarantine: permanent || attempts >= r.o.MaxAttempts}
	r.n.failed.Add(1)
	attrs := []any{slog.String("owner", r.o.Owner), slog.String("message_id", row.ID), slog.String("aggregate_id", row.AggregateID),
		slog.Int64("sequence", row.Sequence), slog.Int("attempts", attempts), slog.String("error", err.Error())}
	if f.Quarantine {
		r.n.quarantined.Add(1)
		r.o.Logger.Error("idem: relay: row quarantined; its aggregate is blocked until an operator requeues or discards it", attrs...)
	} else {
		f.NextAttempt = r.o.Now().Add(r.o.Backoff.Delay(attempts))
		r.o.Logger.Warn("idem: relay: publish failed, will retry", attrs...)
	}
	r.n.lastErr.Store(&relayError{msg: "publish " + row.ID + ": " + err.Error(), at: r.o.Now()})
	return f
}

// rowMessage returns the broker message the relay publishes for r: ID, key,
// the event headers (broker.HeaderAggregateID, broker.HeaderAggregateVersion when not 0,
// broker.HeaderSequence, broker.HeaderType when set) merged over r's headers, and the
// payload as body.
func rowMessage(r *Row) *broker.Message {
	h := make(broker.Headers, 0, len(r.Headers)+4)
	h = append(h, r.Headers...)
	h.Set(broker.HeaderAggregateID, r.AggregateID)
	if r.Version != 0 {
		h.Set(broker.HeaderAggregateVersion, strconv.FormatInt(r.Version, 10))
	}
	if r.Sequence != 0 {
		h.Set(broker.HeaderSequence, strconv.FormatInt(r.Sequence, 10))
	}
	if r.Type != "" {
		h.Set(broker.HeaderType, r.Type)
	}
	return &broker.Message{ID: r.ID, Key: r.AggregateID, Headers: h, Body: r.Payload}
}
