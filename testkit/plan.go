package testkit

import (
	"fmt"
	"math/rand/v2"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
)

// Event is one message Run delivers, as a producer (an outbox relay)
// would publish it: an event of an aggregate, carried in the headers
// idem.ParseEvent reads, or, without an AggregateID, a plain message.
type Event struct {
	// ID is the message ID, the inbox's key. Default: AggregateID/Version
	// ("order-1/2"); required for an event without both.
	ID string
	// AggregateID is the aggregate the event belongs to
	// (idem.HeaderAggregateID); empty for a plain message.
	AggregateID string
	// Version is the aggregate's version after the event
	// (idem.HeaderAggregateVersion): 1 creates it. 0: none.
	Version int64
	// Type is the event's type name (idem.HeaderType), optional.
	Type string
	// Key is the ordering key (default AggregateID, or ID for a plain
	// message).
	Key string
	// Headers are extra headers.
	Headers broker.Headers
	// Body is the message body.
	Body []byte
}

// message returns ev as a broker message.
func (ev Event) message() (*broker.Message, error) {
	m := &broker.Message{ID: ev.ID, Key: ev.Key, Headers: ev.Headers.Clone(), Body: ev.Body}
	switch {
	case ev.AggregateID != "":
		if ev.Version < 0 {
			return nil, fmt.Errorf("version %d of aggregate %q is negative", ev.Version, ev.AggregateID)
		}
		for k, v := range (idem.Event{AggregateID: ev.AggregateID, Version: ev.Version, Type: ev.Type}).Headers().All() {
			m.Headers.Set(k, v)
		}
		if m.ID == "" && ev.Version > 0 {
			m.ID = fmt.Sprintf("%s/%d", ev.AggregateID, ev.Version)
		}
		if m.Key == "" {
			m.Key = ev.AggregateID
		}
	case ev.Version != 0:
		return nil, fmt.Errorf("version %d without an AggregateID", ev.Version)
	case ev.Type != "":
		m.Headers.Set(idem.HeaderType, ev.Type)
	}
	if m.ID == "" {
		return nil, fmt.Errorf("no ID: set Event.ID (or AggregateID and Version)")
	}
	if m.Key == "" {
		m.Key = m.ID
	}
	if err := driver.ValidateID(m.ID); err != nil {
		return nil, err
	}
	return m, nil
}

// item is one publish of the plan.
type item struct {
	m     *broker.Message
	index int // the event's place in Run's list
	copy  bool
}

// plan returns the order in which Run publishes msgs, with the copies of
// the duplicates, and how many messages come after one listed after them.
func (k *Kit[Tx]) plan(msgs []*broker.Message) ([]item, int) {
	k.seq++
	rnd := rand.New(rand.NewPCG(k.opts.Seed, k.seq))
	orig := make([]item, len(msgs))
	for i, m := range msgs {
		orig[i] = item{m: m, index: i}
	}
	order := orig
	if !k.opts.NoReorder {
		if k.opts.Profile == memory.Queue {
			order = shuffle(rnd, orig)
		} else {
			order = interleave(rnd, orig)
		}
	}
	if !k.opts.NoDuplicates {
		order = withCopies(rnd, order, !k.opts.NoReorder)
	}
	late, highest := 0, -1
	for _, it := range order {
		if it.copy {
			continue
		}
		if it.index < highest {
			late++
		}
		highest = max(highest, it.index)
	}
	return order, late
}

// shuffle returns items in a random order in which every aggregate with
// two or more events has one of them after a later one.
func shuffle(rnd *rand.Rand, items []item) []item {
	out := append([]item(nil), items...)
	rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	// Each aggregate's positions in out, in the order they come.
	pos := map[string][]int{}
	var aggs []string
	for p, it := range out {
		if a := it.m.Headers.Get(idem.HeaderAggregateID); a != "" {
			if pos[a] == nil {
				aggs = append(aggs, a)
			}
			pos[a] = append(pos[a], p)
		}
	}
	for _, a := range aggs {
		ps := pos[a]
		inOrder := true
		for i := 1; i < len(ps); i++ {
			inOrder = inOrder && out[ps[i-1]].index < out[ps[i]].index
		}
		if inOrder && len(ps) > 1 {
			// The aggregate's first two swap places: the later one now
			// comes first.
			out[ps[0]], out[ps[1]] = out[ps[1]], out[ps[0]]
		}
	}
	return out
}

// interleave returns items with each key's in their order, the keys
// interleaved at random.
func interleave(rnd *rand.Rand, items []item) []item {
	byKey := map[string][]item{}
	var keys []string
	for _, it := range items {
		if _, ok := byKey[it.m.Key]; !ok {
			keys = append(keys, it.m.Key)
		}
		byKey[it.m.Key] = append(byKey[it.m.Key], it)
	}
	out := make([]item, 0, len(items))
	for left := len(items); left > 0; left-- {
		// A uniform interleaving: the next item is a key's head with
		// probability proportional to what the key has left.
		n := rnd.IntN(left)
		for _, key := range keys {
			if n < len(byKey[key]) {
				out = append(out, byKey[key][0])
				byKey[key] = byKey[key][1:]
				break
			}
			n -= len(byKey[key])
		}
	}
	return out
}

// withCopies adds a copy of each message: right after it, or, with
// scatter, anywhere after it.
func withCopies(rnd *rand.Rand, items []item, scatter bool) []item {
	out := make([]item, 0, 2*len(items))
	for _, it := range items {
		out = append(out, it)
		if !scatter {
			out = append(out, item{m: it.m, index: it.index, copy: true})
		}
	}
	if !scatter {
		return out
	}
	for _, it := range items {
		p := 0
		for out[p].m != it.m {
			p++
		}
		at := p + 1 + rnd.IntN(len(out)-p)
		out = append(out[:at], append([]item{{m: it.m, index: it.index, copy: true}}, out[at:]...)...)
	}
	return out
}
