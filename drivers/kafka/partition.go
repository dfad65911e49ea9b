package kafka

import (
	"bytes"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker/driver"
)

// Entry states.
const (
	stReady    uint8 = iota // fetched or nacked, waiting to be handed out
	stInFlight              // handed out, not settled
	stSettling              // a dead-letter or retry copy is being written
	stAcked                 // settled; the commit may move past it
)

// entry is one fetched record, held from fetch until the partition's
// committed offset moves past it.
type entry struct {
	p         *partition
	rec       *kgo.Record
	state     uint8
	attempt   int       // delivery number of the current (or next) hand-out
	seq       uint32    // bumped per hand-out; stale ack IDs carry an old one
	notBefore time.Time // not handed out before (nack delay, retry topic)
}

// ackID is the driver.AckID of one hand-out of an entry.
type ackID struct {
	e   *entry
	seq uint32
}

// partition is the consumer's state for one assigned partition. A
// partition that is revoked or lost is never reused: a new assignment of
// the same partition gets a new one, so old ack IDs go stale.
type partition struct {
	tp
	retry     bool     // a retry-topic partition: attempt and due time come from headers
	recs      []*entry // every record not yet below the commit point, in offset order
	ready     []*entry // records to hand out, in offset order
	inflight  int      // entries in stInFlight or stSettling
	next      int64    // offset after the last fetched record; -1 before any
	lastEpoch int32    // leader epoch of the last record the commit point passed
	committed int64    // last committed offset (by this member); -1 unknown
	// handedHigh is the highest offset handed out; committedHigh the one
	// recorded in the last commit's metadata; redeliverUpTo the one read
	// from the committed metadata at assignment: records up to it were
	// handed out by an earlier owner, so they are known redeliveries.
	handedHigh, committedHigh, redeliverUpTo int64
	paused                                   bool
	revoking                                 bool
	lost                                     bool
}

func newPartition(t tp, retry bool) *partition {
	return &partition{tp: t, retry: retry, next: -1, committed: -1, lastEpoch: -1, handedHigh: -1, committedHigh: -1, redeliverUpTo: -1}
}

func (p *partition) ingest(r *kgo.Record) {
	e := &entry{p: p, rec: r, attempt: 1}
	if p.retry {
		for _, h := range r.Headers {
			switch h.Key {
			case HeaderAttempt:
				if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 1 {
					e.attempt = n
				}
			case HeaderNotBefore:
				if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
					e.notBefore = time.UnixMilli(ms)
				}
			}
		}
	}
	if r.Offset <= p.redeliverUpTo {
		e.attempt++
	}
	p.recs = append(p.recs, e)
	p.ready = append(p.ready, e)
	p.next = r.Offset + 1
}

// take appends up to n-len(out) due records to out. Ordered partitions hand
// out one record at a time. It returns when the first held-back record is
// due, if one is.
func (p *partition) take(out []*driver.Message, n int, now time.Time, ordered bool) ([]*driver.Message, time.Time) {
	if len(p.ready) == 0 {
		return out, time.Time{}
	}
	if ordered {
		if p.inflight > 0 {
			return out, time.Time{}
		}
		e := p.ready[0]
		if e.notBefore.After(now) {
			return out, e.notBefore
		}
		p.ready = p.ready[1:]
		return append(out, p.handOut(e)), time.Time{}
	}
	var due time.Time
	keep := p.ready[:0]
	for i, e := range p.ready {
		if len(out) >= n {
			keep = append(keep, p.ready[i:]...)
			break
		}
		if e.notBefore.After(now) {
			if due.IsZero() || e.notBefore.Before(due) {
				due = e.notBefore
			}
			keep = append(keep, e)
			continue
		}
		out = append(out, p.handOut(e))
	}
	clear(p.ready[len(keep):])
	p.ready = keep
	return out, due
}

func (p *partition) handOut(e *entry) *driver.Message {
	e.state = stInFlight
	e.seq++
	p.inflight++
	r := e.rec
	p.handedHigh = max(p.handedHigh, r.Offset)

	m := &driver.Message{
		Body:        bytes.Clone(r.Value),
		AckID:       &ackID{e: e, seq: e.seq},
		Attempt:     e.attempt,
		Redelivered: e.attempt > 1,
		PublishTime: r.Timestamp,
		AsFunc: func(i any) bool {
			if rp, ok := i.(**kgo.Record); ok {
				*rp = r
				return true
			}
			return false
		},
	}
	if m.Body == nil {
		m.Body = []byte{}
	}
	if len(r.Key) > 0 {
		m.Key = string(r.Key)
	}
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderID:
			m.ID = string(h.Value)
		case HeaderAttempt, HeaderNotBefore:
		default:
			if m.Headers == nil {
				m.Headers = make(map[string]string, len(r.Headers))
			}
			m.Headers[h.Key] = string(h.Value)
		}
	}
	return m
}

// requeue puts a nacked entry back, in offset order, due at notBefore.
func (p *partition) requeue(e *entry, notBefore time.Time) {
	e.state = stReady
	e.notBefore = notBefore
	e.attempt++
	p.inflight--
	i, _ := slices.BinarySearchFunc(p.ready, e.rec.Offset, func(x *entry, off int64) int {
		switch {
		case x.rec.Offset < off:
			return -1
		case x.rec.Offset > off:
			return 1
		}
		return 0
	})
	p.ready = slices.Insert(p.ready, i, e)
}

func (p *partition) settle(e *entry) {
	e.state = stAcked
	p.inflight--
}

// position pops the settled prefix and returns the offset to commit (the
// first unsettled record, or the one after the last fetched) and its epoch;
// ok is false if nothing was fetched yet.
func (p *partition) position() (kgo.EpochOffset, bool) {
	i := 0
	for i < len(p.recs) && p.recs[i].state == stAcked {
		p.lastEpoch = p.recs[i].rec.LeaderEpoch
		i++
	}
	if i > 0 {
		clear(p.recs[:i])
		p.recs = p.recs[i:]
	}
	switch {
	case len(p.recs) > 0:
		return kgo.EpochOffset{Epoch: p.lastEpoch, Offset: p.recs[0].rec.Offset}, true
	case p.next >= 0:
		return kgo.EpochOffset{Epoch: p.lastEpoch, Offset: p.next}, true
	}
	return kgo.EpochOffset{}, false
}
