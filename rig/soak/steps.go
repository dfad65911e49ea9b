package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/conformance"
)

// kinds lists the fault kinds the target can do, and records the others as
// not applicable.
func (r *runner) kinds() []Kind {
	var out []Kind
	for _, k := range []Kind{Rebalance, ConsumerKill, RelayKill, DatabaseReset, BrokerReset, BrokerRestart, LockExpiry} {
		why, na := r.t.NotApplicable[k]
		switch {
		case na:
		case k == BrokerReset && r.t.BrokerAddr == "" && r.t.BrokerReset == nil:
			why, na = "the target has no way to cut broker connections", true
		case k == BrokerRestart && r.t.BrokerRestart == nil:
			why, na = "the target cannot restart its broker", true
		case k == LockExpiry && r.t.LockTimeout <= 0:
			why, na = "the subscription declares no lock timeout", true
		}
		if na {
			r.rep.NotApplicable[k] = why
			continue
		}
		out = append(out, k)
	}
	return out
}

// run starts one relay and one consumer, the producer, and the schedule,
// then waits until every message's effect is committed.
func (r *runner) run(ctx context.Context) error {
	plan := schedule(r.cfg.Seed, r.kinds())
	for _, s := range plan {
		r.rep.Plan = append(r.rep.Plan, s.String())
	}
	r.cfg.Logf("soak %s: seed %d, %d messages, store %s, plan %s", r.t.Name, r.cfg.Seed, r.cfg.Messages, r.rep.Store, strings.Join(r.rep.Plan, ", "))
	var err error
	if r.relay, err = r.start(roleRelay); err != nil {
		return err
	}
	c, err := r.start(roleConsumer)
	if err != nil {
		return err
	}
	r.consumers = []*worker{c}
	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	r.prodDone = make(chan struct{})
	go func() {
		defer close(r.prodDone)
		r.prodErr = r.produce(pctx)
	}()
	n := float64(r.cfg.Messages)
	trickle := int64(max(1, r.cfg.Messages/2000))
	for i, s := range plan {
		at := int(math.Ceil(s.at * n))
		r.target.Store(max(r.target.Load(), int64(min(r.cfg.Messages, at+r.cfg.Messages/20))))
		// While a fault is carried out, messages keep coming, but not
		// far past the next fault's point.
		r.limit = int64(r.cfg.Messages)
		if i+1 < len(plan) {
			r.limit = min(r.limit, max(r.target.Load(), int64(plan[i+1].at*n))+100)
		}
		err := r.until(ctx, r.cfg.Timeout, fmt.Sprintf("%d messages applied", at), 0, func() (bool, error) {
			got, err := r.applied(ctx)
			return got >= at, err
		})
		if err != nil {
			return err
		}
		began := time.Now()
		fired, why := r.fire(ctx, s, trickle)
		r.cfg.Logf("soak %s: %s: fired %v %s in %s", r.t.Name, s, fired, why, time.Since(began).Round(time.Millisecond))
		if fired {
			r.rep.Fired[s.kind]++
		} else {
			r.rep.NotFired = append(r.rep.NotFired, fmt.Sprintf("%s: %s", s, why))
		}
	}
	r.target.Store(int64(r.cfg.Messages))
	last, lastAt := -1, time.Now()
	return r.until(ctx, r.cfg.Timeout, "every effect applied", 0, func() (bool, error) {
		got, err := r.applied(ctx)
		if err != nil {
			return false, err
		}
		if got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > StallTimeout {
			return false, fmt.Errorf("soak: stalled at %d of %d effects applied for %s; the consumers' goroutines:%s", got, r.cfg.Messages, StallTimeout, r.dumpStacks())
		}
		return got >= r.cfg.Messages, nil
	})
}

// fire carries out one step and waits until it is seen to fire; it says
// why not when it was not.
func (r *runner) fire(ctx context.Context, s step, trickle int64) (bool, string) {
	wait := func(what string, cond func() (bool, error)) error {
		return r.until(ctx, StepTimeout, what, trickle, cond)
	}
	switch s.kind {
	case Rebalance:
		if s.down {
			return r.shrink(wait)
		}
		return r.grow(wait)
	case ConsumerKill:
		first := int(r.cfg.Seed+uint64(r.seq)) % len(r.consumers)
		ws := append(slices.Clone(r.consumers[first:]), r.consumers[:first]...)
		w, nw, ok, why := r.killBusy(ws, roleConsumer, wait)
		if nw != nil {
			for i := range r.consumers {
				if r.consumers[i] == w {
					r.consumers[i] = nw
				}
			}
		}
		return ok, why
	case RelayKill:
		_, nw, ok, why := r.killBusy([]*worker{r.relay}, roleRelay, wait)
		if nw != nil {
			r.relay = nw
		}
		return ok, why
	case DatabaseReset:
		return r.reset(r.dbProxy, wait)
	case BrokerReset:
		if r.brProxy != nil {
			return r.reset(r.brProxy, wait)
		}
		n, err := r.t.BrokerReset(ctx)
		return firedCount(n, err, "connections cut")
	case BrokerRestart:
		n, err := r.t.BrokerRestart(ctx)
		return firedCount(n, err, "moved")
	case LockExpiry:
		return r.lockExpiry(wait)
	}
	return false, "unknown kind"
}

func firedCount(n int, err error, what string) (bool, string) {
	if err != nil {
		return false, err.Error()
	}
	return n > 0, fmt.Sprintf("(%d %s)", n, what)
}

type waitFunc func(what string, cond func() (bool, error)) error

func logSize(w *worker) int64 {
	fi, err := os.Stat(w.spec.Log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (r *runner) grow(wait waitFunc) (bool, string) {
	for len(r.consumers) < 3 {
		w, err := r.start(roleConsumer)
		if err != nil {
			return false, err.Error()
		}
		r.consumers = append(r.consumers, w)
	}
	if r.t.SingleActive {
		// Standbys: seen once all three run and messages still flow.
		start, err := r.applied(context.Background())
		if err != nil {
			return false, err.Error()
		}
		err = wait("3 consumers run while messages flow", func() (bool, error) {
			for _, w := range r.consumers {
				if w.exited() {
					return false, nil
				}
			}
			got, err := r.applied(context.Background())
			return got > start+10, err
		})
		if err != nil {
			return false, err.Error()
		}
		return true, "(3 consumers: 1 active, 2 hot standbys)"
	}
	err := wait("every one of 3 consumers handles messages", func() (bool, error) {
		for _, w := range r.consumers {
			if logSize(w) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return false, err.Error()
	}
	return true, "(3 consumers handling messages)"
}

func (r *runner) shrink(wait waitFunc) (bool, string) {
	stopping := r.consumers[1:]
	r.consumers = r.consumers[:1]
	for _, w := range stopping {
		w.term()
	}
	err := wait("extra consumers stop", func() (bool, error) {
		for _, w := range stopping {
			if !w.exited() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return false, err.Error()
	}
	for _, w := range stopping {
		if !w.cleanEnd() {
			return false, fmt.Sprintf("a consumer did not stop cleanly: %s", w.failure())
		}
	}
	return true, fmt.Sprintf("(%d consumers stopped, 1 left)", len(stopping))
}

// killBusy kills the first of ws whose log grows (it is handling or
// publishing messages), waits for it to end, and starts its replacement.
func (r *runner) killBusy(ws []*worker, role string, wait waitFunc) (w, nw *worker, fired bool, why string) {
	last := make([]int64, len(ws))
	for i, w := range ws {
		last[i] = logSize(w)
	}
	err := wait(role+" is busy", func() (bool, error) {
		for i, c := range ws {
			n := logSize(c)
			busy := n > last[i] && last[i] > 0
			last[i] = n
			if busy {
				w = c
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, false, err.Error()
	}
	w.kill()
	if err := wait(w.spec.Name+" ends", func() (bool, error) { return w.exited(), nil }); err != nil {
		return w, nil, false, err.Error()
	}
	nw, err = r.start(role)
	if err != nil {
		return w, nil, false, err.Error()
	}
	if w.cmd != nil && !w.sigkill {
		return w, nw, false, fmt.Sprintf("%s did not die of SIGKILL: %v", w.spec.Name, w.err)
	}
	return w, nw, true, fmt.Sprintf("(%s killed while busy)", w.spec.Name)
}

func (r *runner) reset(p *Proxy, wait waitFunc) (bool, string) {
	if err := wait("connections through the proxy", func() (bool, error) {
		n, err := p.Established()
		return n > 0, err
	}); err != nil {
		return false, err.Error()
	}
	n, err := p.Reset()
	return firedCount(n, err, "connections cut")
}

// lockExpiry arms the slow handler, waits for it to start and end, and
// checks that its message was delivered again (a later attempt) after it
// started: the lock expired under it.
func (r *runner) lockExpiry(wait waitFunc) (bool, string) {
	if err := os.WriteFile(r.arm, nil, 0o644); err != nil {
		return false, err.Error()
	}
	var id string
	var startNs int64
	err := wait("a handler turns slow", func() (bool, error) {
		var err error
		id, startNs, err = r.findLine(lineSlowStart, "", 0)
		return id != "", err
	})
	if err != nil {
		return false, err.Error()
	}
	err = wait("the slow message is delivered again", func() (bool, error) {
		got, _, err := r.findLine(lineDelivery, id, startNs)
		return got != "", err
	})
	if err != nil {
		return false, fmt.Sprintf("%s held past the lock timeout was not delivered again: %v", id, err)
	}
	return true, fmt.Sprintf("(%s delivered again while its handler held it)", id)
}

// findLine finds, in the workers' logs, a line of kind (for id, if not
// empty; after ns, and with an attempt above 1 for deliveries) and returns
// its id and time.
func (r *runner) findLine(kind byte, id string, after int64) (string, int64, error) {
	var found string
	var at int64
	err := r.scanLogs(func(k byte, ns int64, lid string, attempt int) bool {
		if k != kind || id != "" && lid != id || ns <= after || kind == lineDelivery && attempt < 2 {
			return true
		}
		found, at = lid, ns
		return false
	})
	return found, at, err
}

// scanLogs calls f for each line of every worker log until f returns false.
func (r *runner) scanLogs(f func(kind byte, ns int64, id string, attempt int) bool) error {
	files, err := filepath.Glob(filepath.Join(r.cfg.Dir, "*.log"))
	if err != nil {
		return err
	}
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 || len(fs[0]) != 1 {
				continue // a line cut by a kill cannot happen (one write), but be safe
			}
			ns, _ := strconv.ParseInt(fs[1], 10, 64)
			attempt := 0
			if len(fs) > 3 {
				attempt, _ = strconv.Atoi(fs[3])
			}
			if !f(fs[0][0], ns, fs[2], attempt) {
				fh.Close()
				return nil
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return nil
}

// check builds the history from the outbox IDs, the logs and the effects
// table, and fills the report.
func (r *runner) check(ctx context.Context) error {
	if r.prodDone != nil {
		<-r.prodDone
		if err := r.prodErr; err != nil && !errors.Is(err, context.Canceled) {
			r.rep.Failures = append(r.rep.Failures, err.Error())
		}
	}
	h := conformance.NewHistory()
	h.Sent(r.ids...)
	if len(r.ids) != r.cfg.Messages {
		r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("the producer committed %d of %d messages", len(r.ids), r.cfg.Messages))
	}
	err := r.scanLogs(func(kind byte, _ int64, id string, _ int) bool {
		switch kind {
		case lineDelivery:
			h.Delivered(id)
			r.rep.Deliveries++
		case linePublished:
			r.rep.Published++
		case lineGapStats:
			r.addGapStats(id)
		}
		return true
	})
	if err != nil {
		return err
	}
	order := conformance.NewOrderLog()
	aggs := map[string]bool{}
	err = r.db.effects(ctx, func(id, agg string, v int) {
		h.Applied(id)
		order.Start(agg, v-1)()
		aggs[agg] = true
	})
	if err != nil {
		return err
	}
	for _, w := range r.all {
		if w.spec.Role == roleConsumer && logSize(w) > 0 {
			r.rep.ConsumersActive++
		}
	}
	r.checkGaps(ctx)
	r.rep.History = h.Check()
	r.rep.Redeliveries = r.rep.Deliveries - r.rep.History.Delivered
	r.rep.OrderViolations = order.FirstDeliveryOrderViolations()
	if len(r.rep.History.DuplicateEffects) == 0 && len(r.rep.OrderViolations) == 0 {
		// An effect recorded again (a repeated version) is a duplicate
		// too; FirstDeliveryOrderViolations allows repeats.
		for agg := range aggs {
			if n := order.Count(agg); n != r.cfg.Messages/r.cfg.Aggregates+boolInt(r.cfg.Messages%r.cfg.Aggregates > aggIndex(agg)) {
				r.rep.OrderViolations = append(r.rep.OrderViolations, fmt.Sprintf("%s: %d effects", agg, n))
			}
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// aggIndex reads the number of an aggregate ID "agg-NNNN".
func aggIndex(agg string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(agg, "agg-"))
	return n
}

// addGapStats adds a gap-stats line's deltas ("early,earlyApplied,gaps,
// retried,holds") to the report.
func (r *runner) addGapStats(s string) {
	fs := strings.Split(s, ",")
	if len(fs) != 5 {
		return
	}
	for i, p := range []*int64{&r.rep.Early, &r.rep.EarlyApplied, &r.rep.Gaps, &r.rep.GapRetries} {
		n, _ := strconv.ParseInt(fs[i], 10, 64)
		*p += n
	}
	r.rep.HoldsGaps = r.rep.HoldsGaps || fs[4] == "true"
}

// checkGaps fails the run if its inboxes hold gaps but gaps occurred
// without holds, or went back to the broker (each retry a delivery
// counted against the delivery limit), or if anything was dead-lettered.
func (r *runner) checkGaps(ctx context.Context) {
	if r.rep.HoldsGaps && r.rep.Gaps > 0 && r.rep.Early == 0 {
		r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%d gaps on a subscription without order, none held in the store", r.rep.Gaps))
	}
	if r.rep.HoldsGaps && r.rep.GapRetries > 0 {
		r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%d gaps retried through the broker, where the inbox holds them", r.rep.GapRetries))
	}
	if r.t.DeadLettered == nil {
		return
	}
	n, err := r.t.DeadLettered(ctx)
	if err != nil {
		r.rep.Failures = append(r.rep.Failures, "count the dead letters: "+err.Error())
		return
	}
	r.rep.DeadLettered = n
	if n > 0 {
		r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%d messages dead-lettered", n))
	}
}
