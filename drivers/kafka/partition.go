package kafka

import (
	"math"
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

// handed is an entry as it was handed out. Its seq and attempt are read
// under the subscription's lock: a rewind (a revoke, a broker restart) may
// change them as soon as the lock is released, while the message is still
// being built.
type handed struct {
	e       *entry
	seq     uint32
	attempt int
}

// snapshot records es as handed out. Called with the subscription's lock
// held (or on entries no other goroutine sees).
func snapshot(es []*entry) []handed {
	out := make([]handed, len(es))
	for i, e := range es {
		out[i] = handed{e: e, seq: e.seq, attempt: e.attempt}
	}
	return out
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
	retry     bool          // a retry-topic partition: attempt and due time come from headers
	limit     int           // the subscription's DeliveryLimit (0: none)
	maxDelay  time.Duration // the subscription's MaxNackDelay
	recs      []*entry      // every record not yet below the commit point, in offset order
	ready     []*entry      // records to hand out, in offset order
	inflight  int           // entries in stInFlight or stSettling
	next      int64         // offset after the last fetched record; -1 before any
	lastEpoch int32         // leader epoch of the last record the commit point passed
	committed int64         // last committed offset (by this member); -1 unknown
	// handedHigh is the highest offset handed out; committedHigh the one
	// recorded in the last commit's metadata; redeliverUpTo the one read
	// from the committed metadata at assignment: records up to it were
	// handed out by an earlier owner, so they are known redeliveries.
	handedHigh, committedHigh, redeliverUpTo int64
	paused                                   bool
	revoking                                 bool
	lost                                     bool
}

func newPartition(t tp, retry bool, limit int, maxDelay time.Duration) *partition {
	return &partition{tp: t, retry: retry, limit: limit, maxDelay: maxDelay, next: -1, committed: -1, lastEpoch: -1, handedHigh: -1, committedHigh: -1, redeliverUpTo: -1}
}

// ingest files r, in e (a slot of the poll's slab of entries), received
// at now.
func (p *partition) ingest(e *entry, r *kgo.Record, now time.Time) {
	*e = entry{p: p, rec: r, attempt: 1}
	if p.retry {
		e.attempt, e.notBefore = retryHeaders(r.Headers, p.limit, now.Add(p.maxDelay))
	}
	if r.Offset <= p.redeliverUpTo && e.attempt < maxAttempt {
		e.attempt++
	}
	p.recs = append(p.recs, e)
	p.ready = append(p.ready, e)
	p.next = r.Offset + 1
}

// rewind forgets the entries at and after off, because kgo moved the
// partition's position back to off: after an ErrDataLoss (the broker lost
// records this member consumed, or could not say where the log diverged
// from the one consumed), kgo resets the partition to where the surviving
// log ends, or to the reset offset (the start of the partition), and
// fetches from there. The records from off are the log's now, and they are
// fetched again; the entries held below off stay, as they are still in the
// log. Deliveries of the forgotten entries go stale (their settles fail
// with ErrLockLost, as after a revoke), so that the commit point follows
// the records fetched from off: had an old entry at or after off stayed,
// its ack could carry the commit point past new records below it that were
// never processed. The committed offset is forgotten too, so that the next
// commit moves it back to the commit point, and the records up to the
// highest offset handed out are flagged as redelivered. It reports whether
// records ready to hand out were dropped.
func (p *partition) rewind(off int64) (droppedReady bool) {
	keep := p.recs[:0]
	for _, e := range p.recs {
		if e.rec.Offset < off {
			keep = append(keep, e)
			continue
		}
		if e.state == stInFlight || e.state == stSettling {
			p.inflight--
		}
		e.state = stAcked // a copy being written finishes without settling
		e.seq++           // ack IDs handed out go stale
	}
	clear(p.recs[len(keep):])
	p.recs = keep
	ready := p.ready[:0]
	for _, e := range p.ready {
		if e.rec.Offset < off {
			ready = append(ready, e)
		}
	}
	droppedReady = len(ready) < len(p.ready)
	clear(p.ready[len(ready):])
	p.ready = ready
	p.redeliverUpTo = max(p.redeliverUpTo, p.handedHigh)
	p.next = off
	p.committed, p.lastEpoch = -1, -1
	return droppedReady
}

// maxAttempt bounds delivery numbers, so that counting never overflows.
const maxAttempt = math.MaxInt32

// retryHeaders reads the delivery number and due time that the driver
// wrote on a retry-topic copy (see nack), trusting them only as far as the
// driver could have set them, since any producer with write access to the
// retry topic can write these headers too: the attempt is from 1 to the
// delivery limit (to maxAttempt without one), and the due time at most
// latest (the subscription's MaxNackDelay from now). A value that does not parse is ignored (attempt
// 1, due now); the last of repeated headers counts, as the driver strips
// earlier ones when it copies a record. Records of the subscription's own
// topic never reach here: there, these headers are ignored.
func retryHeaders(hs []kgo.RecordHeader, limit int, latest time.Time) (attempt int, notBefore time.Time) {
	attempt = 1
	hi := maxAttempt
	if limit > 0 {
		hi = limit
	}
	for _, h := range hs {
		switch h.Key {
		case HeaderAttempt:
			if n, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && n >= 1 {
				attempt = int(min(n, int64(hi)))
			}
		case HeaderNotBefore:
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				notBefore = time.UnixMilli(min(ms, ceilMilli(latest)))
			}
		}
	}
	return attempt, notBefore
}

// take appends up to n-len(out) due entries to out, marking them handed
// out (materialize makes the messages). Ordered partitions hand out one
// record at a time. It returns when the first held-back record is due, if
// one is.
func (p *partition) take(out []*entry, n int, now time.Time, ordered bool) ([]*entry, time.Time) {
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
		p.ready[0] = nil
		p.ready = p.ready[1:]
		p.handOut(e)
		return append(out, e), time.Time{}
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
		p.handOut(e)
		out = append(out, e)
	}
	clear(p.ready[len(keep):])
	p.ready = keep
	return out, due
}

func (p *partition) handOut(e *entry) {
	e.state = stInFlight
	e.seq++
	p.inflight++
	p.handedHigh = max(p.handedHigh, e.rec.Offset)
}

// handout is one hand-out of an entry: the message given to the portable
// layer and its ack ID, in one allocation (materialize allocates them a
// batch at a time).
type handout struct {
	msg driver.Message
	id  ackID
}

// materialize makes the messages for entries just handed out (take). It
// runs without the subscription's lock: until the messages are returned,
// nothing else changes the fields it reads (rec, seq, attempt).
//
// Allocations are per batch, not per record: one slab of handouts, one
// buffer for the bodies (each body a capacity-capped window of it, so an
// append by the user reallocates rather than overwriting a neighbour) and
// one string for the IDs and keys, and one backing array for the headers
// (each message's a capacity-capped window of it too). Reserved headers (wary-...) that the driver does not read are
// dropped: another producer could have set them. With deadLetters (the
// records are dead letters this driver wrote), the dead-letter reason and
// source are kept.
func materialize(es []handed, deadLetters bool) []*driver.Message {
	if len(es) == 0 {
		return nil
	}
	nb, ns, nh := 0, 0, 0
	for _, x := range es {
		r := x.e.rec
		nb += len(r.Value)
		ns += len(r.Key)
		nh += len(r.Headers)
		for _, h := range r.Headers {
			if h.Key == HeaderID {
				ns += len(h.Value)
				break
			}
		}
	}
	var hs []handout // allocated in slabs of up to slabLen
	out := make([]*driver.Message, len(es))
	bodies := make([]byte, 0, nb)
	sb := make([]byte, 0, ns)
	var hb driver.Headers // allocated when the first header is kept

	type span struct{ id0, id1, k0, k1 int }
	spans := make([]span, len(es))
	for i, x := range es {
		r := x.e.rec
		if len(hs) == 0 {
			hs = make([]handout, min(slabLen, len(es)-i))
		}
		h := &hs[0]
		hs = hs[1:]
		h.id = ackID{e: x.e, seq: x.seq}
		m := &h.msg
		m.AckID = &h.id
		m.Attempt = x.attempt
		m.Redelivered = x.attempt > 1
		m.PublishTime = r.Timestamp
		m.As = (*record)(r)
		b0 := len(bodies)
		bodies = append(bodies, r.Value...)
		m.Body = bodies[b0:len(bodies):len(bodies)]
		sp := &spans[i]
		sp.k0 = len(sb)
		sb = append(sb, r.Key...)
		sp.k1 = len(sb)
		sp.id0, sp.id1 = sp.k1, sp.k1
		hasID := false // the first ID header counts, as in the sizing above
		h0 := len(hb)
		for _, hd := range r.Headers {
			switch hd.Key {
			case HeaderID:
				if !hasID {
					hasID = true
					sb = append(sb, hd.Value...)
					sp.id1 = len(sb)
				}
			case HeaderAttempt, HeaderNotBefore:
			case driver.HeaderDeadLetterReason, HeaderDeadLetterSource:
				if deadLetters {
					if hb == nil {
						hb = make(driver.Headers, 0, nh)
					}
					hb = append(hb, [2]string{hd.Key, string(hd.Value)})
				}
			default:
				if driver.ReservedHeader(hd.Key) {
					continue
				}
				if hb == nil {
					hb = make(driver.Headers, 0, nh)
				}
				hb = append(hb, [2]string{hd.Key, string(hd.Value)})
			}
		}
		if h1 := len(hb); h1 > h0 {
			m.Headers = lastOfEach(hb[h0:h1:h1])
		}
		out[i] = m
	}
	str := string(sb)
	for i := range out {
		sp := spans[i]
		out[i].Key = str[sp.k0:sp.k1]
		out[i].ID = str[sp.id0:sp.id1]
	}
	return out
}

// slabLen is how many handouts (or entries) are allocated at once: enough
// to make the allocation per batch rather than per record, few enough to
// stay in the allocator's size classes.
const slabLen = 64

// record is Message.As on received messages: **kgo.Record. A conversion
// of the record's pointer, it costs no allocation.
type record kgo.Record

func (r *record) As(i any) bool {
	if rp, ok := i.(**kgo.Record); ok {
		*rp = (*kgo.Record)(r)
		return true
	}
	return false
}

// requeue puts a nacked entry back, in offset order, due at notBefore.
func (p *partition) requeue(e *entry, notBefore time.Time) {
	e.state = stReady
	e.notBefore = notBefore
	if e.attempt < maxAttempt {
		e.attempt++
	}
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

// lastOfEach returns h with each name once, at its last value (as a map
// of a record's headers kept them): Kafka lets a record repeat a header
// name. h is rewritten in place.
func lastOfEach(h driver.Headers) driver.Headers {
	if len(h) < 2 {
		return h
	}
	var seen map[string]int // past a few headers, instead of a scan
	if len(h) > 16 {
		seen = make(map[string]int, len(h))
	}
	out := h[:0]
	for _, p := range h {
		j := -1
		if seen != nil {
			if k, ok := seen[p[0]]; ok {
				j = k
			} else {
				seen[p[0]] = len(out)
			}
		} else {
			for k := range out {
				if out[k][0] == p[0] {
					j = k
					break
				}
			}
		}
		if j >= 0 {
			out[j][1] = p[1]
			continue
		}
		out = append(out, p)
	}
	clear(h[len(out):])
	return out
}
