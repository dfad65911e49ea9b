package memory

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// The engine. Every function here runs with Broker.mu held.

// topic is a named topic: dedup, partition choice and fan-out to its
// subscriptions.
type topic struct {
	name   string
	cfg    TopicConfig // normalized
	caps   capability.Topic
	subs   map[string]*queue
	order  []*queue // subscriptions in creation order
	dedup  map[dedupKey]time.Time
	dedupQ []dedupEntry // publish order, for pruning
	rr     int          // next partition for keyless records
}

// dedupKey is what must be unique inside the dedup window: the message ID,
// and with DedupMessageGroup its key.
type dedupKey struct{ group, id string }

type dedupEntry struct {
	k  dedupKey
	at time.Time
}

// message is a stored message; its slices and maps are never shared with
// callers.
type message struct {
	id, key   string
	headers   driver.Headers
	body      []byte
	published time.Time
}

type state uint8

const (
	stReady    state = iota // deliverable from readyAt on
	stInflight              // delivered, locked by owner until lockUntil
	stAcked                 // acked; kept until the commit point passes it (Partitioned)
	stGone                  // dead-lettered or dropped: never delivered again
)

type entry struct {
	m         *message
	part      int
	state     state
	readyAt   time.Time
	attempt   int
	token     uint64
	owner     *handle
	lockUntil time.Time // zero: no expiry
}

// part is one partition of a queue (non-partitioned queues have one).
type part struct {
	recs    []*entry // from the commit point on (Partitioned) or every live entry
	settled int      // acked or gone entries in recs
	owner   *handle  // Partitioned: the consumer the partition is assigned to
}

// queue is a subscription, or a subscription's dead-letter queue.
type queue struct {
	b           *Broker
	name        string
	caps        capability.Subscription
	dlq         *queue // nil for a dead-letter queue
	partitioned bool
	hol         bool // one message in flight per key, in order
	// live counts, on a hol queue, the unsettled entries of each key, so
	// that take stops once every key is blocked.
	live      map[string]int
	lock      time.Duration
	limit     int
	retention time.Duration
	parts     []*part
	handles   []*handle // open consumers, in open order
	// signal wakes every receiver waiting on a partitioned queue, whose
	// receivers own different partitions.
	signal chan struct{}
	// waiters are the receivers waiting on any other queue, in arrival
	// order. Any of them can take what any other can, so notify wakes one,
	// which wakes the next once it took something (see wait).
	waiters []chan struct{}
	wakes   int // receivers woken that found nothing to take (tests)
	rr      int
	checkAt time.Time // expire has nothing to do before this time
}

// handle is one open consumer of a queue.
type handle struct {
	q      *queue
	closed bool
	done   chan struct{}
}

func newTopic(name string, cfg TopicConfig) *topic {
	caps := cfg.topicCaps()
	caps.Source = capability.Source{Read: "the embedded broker's configuration of topic " + name}
	return &topic{name: name, cfg: cfg, caps: caps, subs: map[string]*queue{}, dedup: map[dedupKey]time.Time{}}
}

// addSub creates subscription name of t.
func (t *topic) addSub(b *Broker, name string) {
	q := newQueue(b, t.name+"/"+name, t.cfg, false)
	t.subs[name] = q
	t.order = append(t.order, q)
}

func newQueue(b *Broker, name string, cfg TopicConfig, dead bool) *queue {
	q := &queue{b: b, name: name, lock: cfg.LockTimeout, retention: cfg.MessageRetention, signal: make(chan struct{})}
	// The configuration is the broker's: every setting is read.
	src := capability.Source{Read: "the embedded broker's configuration of subscription " + name}
	if dead {
		q.caps = deadLetterCaps(cfg)
		q.caps.Source = src
		q.parts = []*part{{}}
		return q
	}
	q.caps = cfg.subCaps()
	q.caps.Source = src
	q.limit = cfg.DeliveryLimit
	q.partitioned = cfg.Profile == Partitioned
	q.hol = cfg.Profile == SQSFIFO || cfg.Profile == ServiceBus
	if q.hol {
		q.live = map[string]int{}
	}
	q.parts = make([]*part, cfg.Partitions)
	for i := range q.parts {
		q.parts[i] = &part{}
	}
	q.dlq = newQueue(b, name+"/$deadletter", cfg, true)
	return q
}

func copyMessage(m *driver.Message, now time.Time) *message {
	return &message{id: m.ID, key: m.Key, headers: m.Headers.Clone(), body: bytes.Clone(m.Body), published: now}
}

func messageSize(m *driver.Message) int {
	n := len(m.ID) + len(m.Key) + len(m.Body)
	for _, h := range m.Headers {
		n += len(h[0]) + len(h[1])
	}
	return n
}

// check validates a batch before anything of it is stored.
func (t *topic) check(msgs []*driver.Message) error {
	if t.caps.MaxBatchSize > 0 && len(msgs) > t.caps.MaxBatchSize {
		return errorf(codeInvalid, "batch of %d messages, over the limit of %d", len(msgs), t.caps.MaxBatchSize)
	}
	for _, m := range msgs {
		if m == nil {
			return errorf(codeInvalid, "nil message")
		}
		if t.caps.KeyRequired && m.Key == "" {
			return errorf(codeInvalid, "message %q has no key (%s), which profile %s requires", m.ID, t.caps.OrderingKey, t.cfg.Profile)
		}
		if max := t.caps.MaxMessageSize; max > 0 && messageSize(m) > max {
			return errorf(codeTooLarge, "message %q is %d bytes, over the limit of %d", m.ID, messageSize(m), max)
		}
	}
	return nil
}

// publish stores m on every subscription of t, unless dedup drops it.
func (t *topic) publish(m *driver.Message, now time.Time) {
	if w := t.cfg.DedupWindow; w > 0 && m.ID != "" {
		for len(t.dedupQ) > 0 && now.Sub(t.dedupQ[0].at) >= w {
			d := t.dedupQ[0]
			if at, ok := t.dedup[d.k]; ok && at.Equal(d.at) {
				delete(t.dedup, d.k)
			}
			t.dedupQ[0] = dedupEntry{}
			t.dedupQ = t.dedupQ[1:]
		}
		k := dedupKey{id: m.ID}
		if t.cfg.DedupScope == capability.DedupMessageGroup {
			k.group = m.Key
		}
		if at, ok := t.dedup[k]; ok && now.Sub(at) < w {
			return // accepted and silently dropped
		}
		t.dedup[k] = now
		t.dedupQ = append(t.dedupQ, dedupEntry{k: k, at: now})
	}
	p := 0
	if n := t.cfg.Partitions; t.cfg.Profile == Partitioned && n > 1 {
		if m.Key != "" {
			h := fnv.New32a()
			h.Write([]byte(m.Key))
			p = int(h.Sum32() % uint32(n))
		} else {
			p = t.rr % n
			t.rr++
		}
	}
	msg := copyMessage(m, now)
	for _, q := range t.order {
		q.push(msg, p)
	}
}

// push appends a message to partition p. Stored messages are immutable, so
// subscriptions share them.
func (q *queue) push(m *message, p int) {
	pt := q.parts[p]
	pt.recs = append(pt.recs, &entry{m: m, part: p})
	if q.hol {
		q.live[m.key]++
	}
	q.schedule(m.published.Add(q.retention))
	q.notify()
}

// notify tells q's waiting receivers that something changed: on a
// partitioned queue it wakes all of them, elsewhere the first, which passes
// the turn on (taken) once it took something. Waking every receiver of a
// queue that holds one message group would wake them all to find nothing
// after every settle.
func (q *queue) notify() {
	if q.partitioned {
		close(q.signal)
		q.signal = make(chan struct{})
		return
	}
	if len(q.waiters) > 0 {
		close(q.waiters[0])
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
	}
}

// wait returns the channel a receiver waits on for notify. A receiver that
// was woken and found nothing to take keeps its place at the front (first):
// sent to the back, it could lose every turn to a receiver that comes back
// quicker, and a consumer that joins a queue would never receive.
func (q *queue) wait(first bool) chan struct{} {
	if q.partitioned {
		return q.signal
	}
	c := make(chan struct{})
	if first {
		q.waiters = slices.Insert(q.waiters, 0, c)
	} else {
		q.waiters = append(q.waiters, c)
	}
	return c
}

// leave is called by a receiver that stops waiting on c without taking
// anything: if notify had chosen it, the turn passes to the next one.
func (q *queue) leave(c chan struct{}) {
	if q.partitioned {
		return
	}
	if i := slices.Index(q.waiters, c); i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
		return
	}
	q.notify()
}

// taken is called by a receiver that took messages: others may find more.
func (q *queue) taken() {
	if !q.partitioned {
		q.notify()
	}
}

func due(e *entry, now time.Time) bool {
	return e.state == stReady && !e.readyAt.After(now)
}

// expire applies the passage of time: expired locks return to the queue,
// messages past retention are dropped. It scans only once checkAt, a lower
// bound of the next such event, has come.
func (q *queue) expire(now time.Time) {
	if now.Before(q.checkAt) {
		return
	}
	changed := false
	q.checkAt = never
	for _, p := range q.parts {
		for _, e := range p.recs {
			switch e.state {
			case stInflight:
				if !e.lockUntil.IsZero() && !now.Before(e.lockUntil) {
					q.release(e, 0, now)
					changed = true
				}
			case stReady, stAcked:
				if !now.Before(e.m.published.Add(q.retention)) {
					q.settle(e, stGone)
					changed = true
				}
			}
			switch e.state {
			case stInflight:
				if !e.lockUntil.IsZero() {
					q.schedule(e.lockUntil)
				}
			case stReady, stAcked:
				q.schedule(e.m.published.Add(q.retention))
			}
		}
	}
	if changed {
		q.compact()
		q.notify()
	}
}

// never is a time after every event.
var never = time.Unix(1<<62, 0)

// schedule records that expire has work to do at t.
func (q *queue) schedule(t time.Time) {
	if t.Before(q.checkAt) {
		q.checkAt = t
	}
}

// extend moves the lock of an entry in flight to until.
func (q *queue) extend(e *entry, until time.Time) {
	e.lockUntil = until
	q.schedule(until)
}

// nextDue returns the earliest future time at which the passage of time
// changes what q can deliver (zero: none).
func (q *queue) nextDue(now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, p := range q.parts {
		for _, e := range p.recs {
			switch e.state {
			case stInflight:
				if !e.lockUntil.IsZero() {
					consider(e.lockUntil)
				}
			case stReady:
				consider(e.readyAt)
			}
		}
	}
	return next
}

// take delivers up to limit messages to h.
func (q *queue) take(h *handle, limit int, now time.Time) []*driver.Message {
	var got []*entry
	switch {
	case q.partitioned:
		n := len(q.parts)
		for i := 0; i < n && len(got) < limit; i++ {
			p := q.parts[(q.rr+i)%n]
			if p.owner != h {
				continue
			}
			for _, e := range p.recs {
				if len(got) == limit {
					break
				}
				if due(e, now) {
					got = append(got, e)
				}
			}
		}
		q.rr++
	case q.hol:
		// The earliest unsettled message of each key goes first, and only
		// when no message of that key is in flight or waiting out a delay.
		blocked := map[string]bool{}
		for _, e := range q.parts[0].recs {
			if len(got) == limit {
				break
			}
			if e.state >= stAcked || blocked[e.m.key] {
				continue
			}
			blocked[e.m.key] = true
			if due(e, now) {
				got = append(got, e)
			}
			if len(blocked) == len(q.live) {
				break // every key's head seen: nothing behind them may go
			}
		}
	default:
		for _, e := range q.parts[0].recs {
			if len(got) == limit {
				break
			}
			if due(e, now) {
				got = append(got, e)
			}
		}
	}
	out := make([]*driver.Message, len(got))
	for i, e := range got {
		q.b.tokens++
		e.state = stInflight
		e.attempt++
		e.token = q.b.tokens
		e.owner = h
		e.lockUntil = time.Time{}
		if q.lock > 0 {
			q.extend(e, now.Add(q.lock))
		}
		out[i] = &driver.Message{
			ID:          e.m.id,
			Key:         e.m.key,
			Headers:     e.m.headers.Clone(),
			Body:        bytes.Clone(e.m.body),
			AckID:       ackID{q: q, e: e, token: e.token},
			Attempt:     e.attempt,
			Redelivered: e.attempt > 1,
			PublishTime: e.m.published,
		}
	}
	return out
}

// ackID identifies one delivery: the entry and the token it was delivered
// under. A token no longer current means the lock was lost.
type ackID struct {
	q     *queue
	e     *entry
	token uint64
}

// lookup returns the entry an ack ID names if that delivery still holds
// its lock.
func (q *queue) lookup(id driver.AckID) (*entry, error) {
	a, ok := id.(ackID)
	if !ok || a.q != q {
		return nil, errorf(codeInvalid, "ack ID of type %T does not belong to subscription %q", id, q.name)
	}
	if a.e.state != stInflight || a.e.token != a.token {
		return nil, errStale
	}
	return a.e, nil
}

// release returns an unsettled delivery to the queue, ready at now+delay,
// or dead-letters it if it has used up its deliveries.
func (q *queue) release(e *entry, delay time.Duration, now time.Time) {
	e.token, e.owner, e.lockUntil = 0, nil, time.Time{}
	if q.limit > 0 && e.attempt >= q.limit {
		q.deadLetter(e, fmt.Sprintf("delivery limit exceeded (%d)", q.limit))
		return
	}
	e.state = stReady
	e.readyAt = now.Add(delay)
	q.schedule(e.m.published.Add(q.retention))
}

// deadLetter moves e to the dead-letter queue with reason.
func (q *queue) deadLetter(e *entry, reason string) {
	m := *e.m
	m.headers = m.headers.Clone()
	m.headers.Set(driver.HeaderDeadLetterReason, reason)
	q.dlq.push(&m, 0)
	q.settle(e, stGone)
}

// settle marks e acked or gone and moves the commit point.
func (q *queue) settle(e *entry, st state) {
	if !q.partitioned {
		st = stGone // per-message acks: nothing to keep
	}
	was := e.state
	e.state, e.token, e.owner, e.lockUntil = st, 0, nil, time.Time{}
	p := q.parts[e.part]
	if was < stAcked {
		p.settled++
		if q.hol {
			if q.live[e.m.key]--; q.live[e.m.key] <= 0 {
				delete(q.live, e.m.key)
			}
		}
	}
	// Entries are not cleared from the backing array: callers may be
	// ranging over it.
	for len(p.recs) > 0 && p.recs[0].state >= stAcked {
		p.recs = p.recs[1:]
		p.settled--
	}
}

// compact drops settled entries from the middle of non-partitioned queues
// once they are the majority.
func (q *queue) compact() {
	if q.partitioned {
		return
	}
	p := q.parts[0]
	if p.settled < 64 || p.settled*2 < len(p.recs) {
		return
	}
	p.recs = slices.DeleteFunc(p.recs, func(e *entry) bool { return e.state == stGone })
	p.settled = 0
}

// open adds a consumer; on a partitioned queue the partitions are assigned
// again.
func (q *queue) open(now time.Time) *handle {
	h := &handle{q: q, done: make(chan struct{})}
	q.handles = append(q.handles, h)
	if q.partitioned {
		q.assign(now)
	}
	q.notify()
	return h
}

// close removes a consumer and returns its unsettled deliveries (and, on a
// partitioned queue, every record after the commit point of its
// partitions) to the queue.
func (q *queue) close(h *handle, now time.Time) {
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	q.handles = slices.DeleteFunc(q.handles, func(x *handle) bool { return x == h })
	if q.partitioned {
		q.assign(now)
	} else {
		for _, e := range q.parts[0].recs {
			if e.state == stInflight && e.owner == h {
				q.release(e, 0, now)
			}
		}
		q.compact()
	}
	q.notify()
}

// assign gives partition i to the (i mod n)th open consumer, revoking it
// from its previous owner where that changes.
func (q *queue) assign(now time.Time) {
	for i, p := range q.parts {
		var owner *handle
		if n := len(q.handles); n > 0 {
			owner = q.handles[i%n]
		}
		if p.owner == owner {
			continue
		}
		if p.owner != nil {
			q.revoke(p, now)
		}
		p.owner = owner
	}
}

// revoke rewinds a partition to its commit point: every record after it,
// acked or not, is delivered again to the next owner.
func (q *queue) revoke(p *part, now time.Time) {
	// Deliveries in flight return first: one that has used up its
	// deliveries is dead-lettered, which settles it and may move the
	// commit point past acked records behind it.
	for _, e := range p.recs {
		if e.state == stInflight {
			q.release(e, 0, now)
		}
	}
	for _, e := range p.recs {
		if e.state == stAcked {
			e.state = stReady
			e.readyAt = time.Time{}
			p.settled--
		}
		// The delivery limit is emulated: the count lives in the consumer
		// and goes with it. The next owner knows only that a record was
		// handed out before (Kafka's commit metadata), so it delivers it
		// as attempt 2.
		if e.attempt > 1 {
			e.attempt = 1
		}
	}
}
