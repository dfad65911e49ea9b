package conformance

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// History records, per message ID, what an end-to-end test sent, what the
// broker delivered and which business effects were applied, and checks the
// record the way Jepsen's queue checker does. It is safe for concurrent
// use.
//
// A message counts as sent when Publish returned nil for it, and as maybe
// sent when Publish failed with an error matching broker.ErrMaybeSent.
// Deliveries may repeat (at-least-once); effects must not.
type History struct {
	mu        sync.Mutex
	sent      map[string]int
	maybe     map[string]int
	delivered map[string]int
	applied   map[string]int
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{sent: map[string]int{}, maybe: map[string]int{}, delivered: map[string]int{}, applied: map[string]int{}}
}

// Sent records that the broker accepted these messages.
func (h *History) Sent(ids ...string) { h.add(h.sent, ids) }

// MaybeSent records that publishing these messages failed in a way that
// may nevertheless have reached the broker.
func (h *History) MaybeSent(ids ...string) { h.add(h.maybe, ids) }

// Delivered records one delivery of each message.
func (h *History) Delivered(ids ...string) { h.add(h.delivered, ids) }

// Applied records that the business effect of each message was applied
// (committed) once more.
func (h *History) Applied(ids ...string) { h.add(h.applied, ids) }

func (h *History) add(m map[string]int, ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		m[id]++
	}
}

// Report is the outcome of Check.
type Report struct {
	Sent, MaybeSent, Delivered, Applied int
	// Lost: sent (accepted by the broker) but never delivered, or, when any
	// effect was recorded, never applied.
	Lost []string
	// Unexpected: delivered or applied but never sent nor maybe sent.
	Unexpected []string
	// DuplicateDeliveries: delivered more than once (allowed: the broker is
	// at-least-once).
	DuplicateDeliveries []string
	// DuplicateEffects: applied more than once (never allowed).
	DuplicateEffects []string
	// Recovered: maybe-sent messages that were delivered after all.
	Recovered []string
}

// Valid reports whether nothing was lost, nothing unexpected arrived and
// no effect was applied twice.
func (r Report) Valid() bool {
	return len(r.Lost) == 0 && len(r.Unexpected) == 0 && len(r.DuplicateEffects) == 0
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent=%d maybe-sent=%d delivered=%d (distinct) applied=%d (distinct): lost=%d unexpected=%d duplicate-deliveries=%d (allowed) duplicate-effects=%d recovered=%d",
		r.Sent, r.MaybeSent, r.Delivered, r.Applied, len(r.Lost), len(r.Unexpected), len(r.DuplicateDeliveries), len(r.DuplicateEffects), len(r.Recovered))
	list := func(name string, ids []string) {
		if len(ids) == 0 {
			return
		}
		shown := ids
		if len(shown) > 10 {
			shown = shown[:10]
		}
		fmt.Fprintf(&b, "\n  %s: %s", name, strings.Join(shown, ", "))
		if len(ids) > len(shown) {
			fmt.Fprintf(&b, " (+%d more)", len(ids)-len(shown))
		}
	}
	list("lost", r.Lost)
	list("unexpected", r.Unexpected)
	list("duplicate effects", r.DuplicateEffects)
	return b.String()
}

// Check computes the report.
func (h *History) Check() Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := Report{Sent: len(h.sent), MaybeSent: len(h.maybe), Delivered: len(h.delivered), Applied: len(h.applied)}
	effects := len(h.applied) > 0
	for id := range h.sent {
		if h.delivered[id] == 0 || effects && h.applied[id] == 0 {
			r.Lost = append(r.Lost, id)
		}
	}
	for id, n := range h.delivered {
		if h.sent[id] == 0 && h.maybe[id] == 0 {
			r.Unexpected = append(r.Unexpected, id)
		} else if h.sent[id] == 0 {
			r.Recovered = append(r.Recovered, id)
		}
		if n > 1 {
			r.DuplicateDeliveries = append(r.DuplicateDeliveries, id)
		}
	}
	for id, n := range h.applied {
		if h.sent[id] == 0 && h.maybe[id] == 0 && h.delivered[id] == 0 {
			r.Unexpected = append(r.Unexpected, id)
		}
		if n > 1 {
			r.DuplicateEffects = append(r.DuplicateEffects, id)
		}
	}
	for _, s := range [][]string{r.Lost, r.Unexpected, r.DuplicateDeliveries, r.DuplicateEffects, r.Recovered} {
		slices.Sort(s)
	}
	return r
}

// OrderLog records, per ordering key, the sequence numbers in the order
// their handlers started, to check order inside a scope. It is safe for
// concurrent use.
type OrderLog struct {
	mu       sync.Mutex
	seqs     map[string][]int
	inflight map[string]int
	overlaps []string
}

// NewOrderLog returns an empty log.
func NewOrderLog() *OrderLog {
	return &OrderLog{seqs: map[string][]int{}, inflight: map[string]int{}}
}

// Start records that a handler for (key, seq) started; call the returned
// function when it ends.
func (l *OrderLog) Start(key string, seq int) (end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seqs[key] = append(l.seqs[key], seq)
	l.inflight[key]++
	if l.inflight[key] > 1 {
		l.overlaps = append(l.overlaps, fmt.Sprintf("%s#%d", key, seq))
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.inflight[key]--
	}
}

// Overlaps lists the handler starts that found another handler of the same
// key running.
func (l *OrderLog) Overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.overlaps)
}

// FirstDeliveryOrderViolations returns, per key, a description of every
// place where a message was first handled before an earlier-sent message of
// the same key had been handled at all. Redeliveries (a sequence number
// seen again) are allowed: at-least-once delivery may go back.
func (l *OrderLog) FirstDeliveryOrderViolations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	keys := make([]string, 0, len(l.seqs))
	for k := range l.seqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		seen := map[int]bool{}
		next := 0 // the lowest sequence number not yet handled
		for _, s := range l.seqs[k] {
			if seen[s] {
				continue
			}
			seen[s] = true
			if s != next {
				out = append(out, fmt.Sprintf("key %s: #%d handled before #%d (order %v)", k, s, next, l.seqs[k]))
				break
			}
			for seen[next] {
				next++
			}
		}
	}
	return out
}

// Count returns how many handler starts were recorded for key.
func (l *OrderLog) Count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seqs[key])
}
