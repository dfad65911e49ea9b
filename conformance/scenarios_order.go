package conformance

import (
	"context"
	"fmt"
	"github.com/wary-go/wary/broker/driver"
	"strconv"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

func init() {
	register(
		scenario{"order-within-scope", func(c Capabilities, _ *Harness) string {
			if c.Ordering == capability.OrderNone {
				return "the driver declares no ordering scope"
			}
			return ""
		}, orderWithinScope},
		scenario{"head-of-line", func(c Capabilities, _ *Harness) string {
			if !c.HeadOfLine {
				return "the driver does not declare HeadOfLine"
			}
			return ""
		}, headOfLine},
		scenario{"per-key-serial-handler", always, perKeySerial},
		scenario{"dedup-within-window", always, dedupWithin},
		scenario{"dedup-expires-after-window", func(c Capabilities, h *Harness) string {
			if c.DedupWindow <= 0 {
				return "the driver declares no dedup window"
			}
			return needWait(dedupWait(c), h, "one and a half dedup windows")
		}, dedupAfter},
		scenario{"competing-consumers-history", always, competingHistory},
	)
}

const (
	orderKeys    = 16
	orderPerKey  = 12
	orderWorkers = 4
)

func seqOf(d *broker.Delivery) int {
	n, _ := strconv.Atoi(d.Message.Headers.Get("seq"))
	return n
}

// orderWithinScope: 16 keys, 12 messages each, published in order per key,
// consumed by 4 competing consumers running the handler loop with per-key
// serial handling: inside every key, messages are first handled in publish
// order, and where the broker declares head-of-line, never two at once.
func orderWithinScope(t T, e *env) {
	ctx, f := e.setup(t)
	var subs []*broker.Subscription
	for i := 0; i < orderWorkers; i++ {
		subs = append(subs, e.sub(ctx, t, f))
	}
	var all []*broker.Message
	for k := 0; k < orderKeys; k++ {
		key := fmt.Sprintf("order-%02d", k)
		for i := 0; i < orderPerKey; i++ {
			m := e.msg(t, key)
			m.Headers.Set("seq", strconv.Itoa(i))
			all = append(all, m)
		}
	}
	// Interleave keys, but keep each key's order: publish round by round.
	for i := 0; i < orderPerKey; i++ {
		var round []*broker.Message
		for k := 0; k < orderKeys; k++ {
			round = append(round, all[k*orderPerKey+i])
		}
		publish(ctx, t, f, round...)
	}
	log := NewOrderLog()
	h := NewHistory()
	for _, m := range all {
		h.Sent(m.ID)
	}
	e.runUntil(ctx, t, subs, len(all), h, func(ctx context.Context, d *broker.Delivery) error {
		end := log.Start(d.Message.Key, seqOf(d))
		defer end()
		return nil
	}, &broker.RunOptions{Concurrency: 4, PerKey: true})
	if r := h.Check(); len(r.Lost) > 0 || len(r.Unexpected) > 0 {
		t.Fatalf("history: %s", r)
	}
	if v := log.FirstDeliveryOrderViolations(); len(v) > 0 {
		t.Fatalf("order within scope %s violated:\n%v", e.caps.Ordering, v)
	}
	if e.caps.HeadOfLine {
		if o := log.Overlaps(); len(o) > 0 {
			t.Fatalf("head-of-line declared, but two handlers of one key ran at once: %v", o)
		}
	}
}

// runUntil runs the handler loop on every subscription until want distinct
// messages were handled, recording deliveries in h.
func (e *env) runUntil(ctx context.Context, t T, subs []*broker.Subscription, want int, h *History, fn broker.Handler, opts *broker.RunOptions) {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(subs))
	// Broker time passes while the loops run (a fake clock advances along
	// with real time), so that nack delays elapse.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rctx.Err() == nil {
			e.h.Wait(rctx, 5*time.Millisecond)
			sleep(rctx, 5*time.Millisecond)
		}
	}()
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Run(rctx, func(ctx context.Context, d *broker.Delivery) error {
				h.Delivered(d.Message.ID)
				err := fn(ctx, d)
				if err == nil {
					mu.Lock()
					seen[d.Message.ID] = true
					if len(seen) == want {
						close(done)
					}
					mu.Unlock()
				}
				return err
			}, opts)
		}()
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		cancel()
		wg.Wait()
		t.Fatalf("handled %d of %d messages within 60s; history: %s", n, want, h.Check())
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}

// headOfLine: while the first message of a scope is held unsettled, no
// consumer gets the second; once it is acked, the second is delivered.
func headOfLine(t T, e *env) {
	ctx, f := e.setup(t)
	a := e.sub(ctx, t, f)
	b := e.sub(ctx, t, f)
	k1a, k1b := e.msg(t, "hol-1"), e.msg(t, "hol-1")
	publish(ctx, t, f, k1a, k1b)
	held, others := e.recvID(ctx, t, a, k1a.ID)
	for _, d := range others {
		t.Fatalf("before the first message of the scope, got %s", d.Message.ID)
	}
	for _, s := range []*broker.Subscription{a, b} {
		for _, d := range recvWithin(ctx, t, s, 1, e.h.Quiet) {
			t.Fatalf("head-of-line declared, but %s was delivered while %s of the same scope was unsettled", d.Message.ID, held.Message.ID)
		}
	}
	ackAll(ctx, t, held)
	next := e.recvEither(ctx, t, a, b, k1b.ID)
	ackAll(ctx, t, next)
}

// recvEither receives from a and b alternately until id arrives.
func (e *env) recvEither(ctx context.Context, t T, a, b *broker.Subscription, id string) *broker.Delivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range []*broker.Subscription{a, b} {
			for _, d := range recvWithin(ctx, t, s, 1, 200*time.Millisecond) {
				if d.Message.ID == id {
					return d
				}
				t.Fatalf("unexpected %s while waiting for %s", d.Message.ID, id)
			}
		}
	}
	t.Fatalf("%s not delivered within 30s", id)
	return nil
}

// perKeySerial: the handler loop with PerKey runs one handler per key at a
// time, in arrival order, and different keys in parallel (proven by a
// handler of one key waiting for a handler of another key to start).
func perKeySerial(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	const keys, per = 4, 6
	var msgs []*broker.Message
	for i := 0; i < per; i++ {
		for k := 0; k < keys; k++ {
			m := e.msg(t, fmt.Sprintf("serial-%d", k))
			m.Headers.Set("seq", strconv.Itoa(i))
			msgs = append(msgs, m)
		}
	}
	publish(ctx, t, f, msgs...)
	log := NewOrderLog()
	h := NewHistory()
	for _, m := range msgs {
		h.Sent(m.ID)
	}
	// The first handler of key 0 waits until some handler of another key
	// has started: with serial-only handling this would never happen.
	otherStarted := make(chan struct{})
	var once sync.Once
	parallelSeen := make(chan bool, 1)
	e.runUntil(ctx, t, []*broker.Subscription{s}, len(msgs), h, func(ctx context.Context, d *broker.Delivery) error {
		end := log.Start(d.Message.Key, seqOf(d))
		defer end()
		if d.Message.Key != "serial-0" {
			once.Do(func() { close(otherStarted) })
			return nil
		}
		if seqOf(d) == 0 && d.Attempt == 1 {
			select {
			case <-otherStarted:
				parallelSeen <- true
			case <-time.After(20 * time.Second):
				parallelSeen <- false
			}
		}
		return nil
	}, &broker.RunOptions{Concurrency: 4, PerKey: true})
	if o := log.Overlaps(); len(o) > 0 {
		t.Fatalf("PerKey: two handlers of one key ran at once: %v", o)
	}
	select {
	case ok := <-parallelSeen:
		if !ok {
			t.Fatalf("PerKey: no handler of another key started while a handler of serial-0 ran: keys are not handled in parallel")
		}
	default:
		t.Fatalf("the first message of serial-0 was never handled on its first attempt")
	}
	if e.caps.Ordering != capability.OrderNone {
		if v := log.FirstDeliveryOrderViolations(); len(v) > 0 {
			t.Fatalf("PerKey on an ordered broker: %v", v)
		}
	}
}

// dedupWithin: publishing the same ID twice inside the declared window
// delivers it once; with no declared window, twice.
func dedupWithin(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "dedup")
	publish(ctx, t, f, m)
	copyOf := *m
	copyOf.Headers = driver.Headers{{"copy", "yes"}}
	publish(ctx, t, f, &copyOf)
	d, _ := e.recvID(ctx, t, s, m.ID)
	ackAll(ctx, t, d)
	if e.caps.DedupWindow > 0 {
		e.expectNone(ctx, t, s, fmt.Sprintf("dedup window %s declared: a second publish of the same ID inside it must be dropped", e.caps.DedupWindow))
		return
	}
	d2, _ := e.recvID(ctx, t, s, m.ID)
	ackAll(ctx, t, d2)
}

func dedupWait(c Capabilities) time.Duration { return c.DedupWindow + c.DedupWindow/2 }

// dedupAfter: after the window has passed, the same ID is delivered again.
func dedupAfter(t T, e *env) {
	ctx, f := e.setup(t)
	s := e.sub(ctx, t, f)
	m := e.msg(t, "dedup")
	publish(ctx, t, f, m)
	d, _ := e.recvID(ctx, t, s, m.ID)
	ackAll(ctx, t, d)
	e.wait(ctx, t, dedupWait(e.caps))
	again := *m
	publish(ctx, t, f, &again)
	d2, _ := e.recvID(ctx, t, s, m.ID)
	ackAll(ctx, t, d2)
}

// competingHistory: 4 consumers share 200 messages; every handler fails
// the first attempt of every fifth message. The history checker finds
// nothing lost and nothing unexpected.
func competingHistory(t T, e *env) {
	ctx, f := e.setup(t)
	var subs []*broker.Subscription
	for i := 0; i < 4; i++ {
		subs = append(subs, e.sub(ctx, t, f))
	}
	h := NewHistory()
	var msgs []*broker.Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, e.msg(t, fmt.Sprintf("hist-%d", i%10)))
	}
	for i := 0; i < len(msgs); i += 20 {
		publish(ctx, t, f, msgs[i:i+20]...)
		for _, m := range msgs[i : i+20] {
			h.Sent(m.ID)
		}
	}
	var mu sync.Mutex
	failed := map[string]bool{}
	failures := 0
	fail := map[string]bool{}
	for i, m := range msgs {
		if i%5 == 0 {
			fail[m.ID] = true
		}
	}
	e.runUntil(ctx, t, subs, len(msgs), h, func(ctx context.Context, d *broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if fail[d.Message.ID] && !failed[d.Message.ID] {
			failed[d.Message.ID] = true
			failures++
			return fmt.Errorf("injected failure")
		}
		h.Applied(d.Message.ID)
		return nil
	}, &broker.RunOptions{Concurrency: 4, PerKey: true})
	if failures != 40 {
		t.Fatalf("the injected failure fired %d times, want 40", failures)
	}
	r := h.Check()
	if len(r.Lost) > 0 || len(r.Unexpected) > 0 {
		t.Fatalf("history: %s", r)
	}
	t.Logf("history: %s", r)
}
