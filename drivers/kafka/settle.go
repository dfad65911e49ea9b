package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker/driver"
)

// HeaderDeadLetterSource carries, on dead-lettered copies, where the
// original record was: "topic/partition@offset".
const HeaderDeadLetterSource = "wary-dead-letter-source"

// lookupLocked returns the entry id refers to, and whether it is the
// current, unsettled hand-out of a partition still owned. An entry acked by
// this very hand-out counts as current (a retried Ack re-commits).
func lookupLocked(id driver.AckID, want ...uint8) (*entry, bool) {
	a, ok := id.(*ackID)
	if !ok || a == nil || a.e == nil {
		return nil, false
	}
	e := a.e
	if e.p.lost || e.seq != a.seq {
		return e, false
	}
	for _, st := range want {
		if e.state == st {
			return e, true
		}
	}
	return e, false
}

// SendAcks marks every delivery of ids acked and commits them all with one
// offset commit (or leaves that to the background commit, with
// CommitInterval). A stale delivery among them is reported alone, as
// LockLost, in a *driver.BatchError.
func (s *subscription) SendAcks(ctx context.Context, ids []driver.AckID) error {
	var stale []bool // by index into ids, when one is
	wake := false
	s.mu.Lock()
	for i, id := range ids {
		e, ok := lookupLocked(id, stInFlight, stAcked)
		if !ok {
			if stale == nil {
				stale = make([]bool, len(ids))
			}
			stale[i] = true
			continue
		}
		if e.state == stInFlight {
			e.p.settle(e)
			s.markSeq++
			// Waiters: an ordered partition's next record, a revoke.
			wake = wake || s.opts.Ordered || e.p.revoking
		}
	}
	if wake {
		s.signalLocked()
	}
	s.mu.Unlock()
	var err error
	if s.opts.CommitInterval <= 0 {
		err = s.commit(ctx)
	}
	if stale == nil {
		return err
	}
	errs := make([]error, len(ids))
	for i := range ids {
		errs[i] = err
		if stale[i] {
			errs[i] = errLockLost
		}
	}
	return driver.BatchErrors(errs)
}

func (s *subscription) SendNacks(ctx context.Context, ids []driver.AckID, delay time.Duration) error {
	var errs []error
	for _, id := range ids {
		if err := s.nack(ctx, id, delay); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *subscription) nack(ctx context.Context, id driver.AckID, delay time.Duration) error {
	if delay > s.opts.MaxNackDelay {
		return &codedError{code: driver.Invalid, err: fmt.Errorf("kafka: nack delay %s is over the subscription's MaxNackDelay (%s)", delay, s.opts.MaxNackDelay)}
	}
	s.mu.Lock()
	e, ok := lookupLocked(id, stInFlight)
	if !ok {
		s.mu.Unlock()
		return errLockLost
	}
	if limit := s.opts.DeliveryLimit; limit > 0 && e.attempt >= limit {
		s.mu.Unlock()
		return s.deadLetter(ctx, id, "delivery limit of "+strconv.Itoa(limit)+" reached")
	}
	if s.opts.RetryTopic == "" {
		e.p.requeue(e, time.Now().Add(delay))
		s.signalLocked()
		s.mu.Unlock()
		return nil
	}
	e.state = stSettling
	next := e.attempt + 1 // read under the lock: a rewind may change e
	s.mu.Unlock()
	r := copyRecord(e.rec, s.opts.RetryTopic)
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: HeaderAttempt, Value: []byte(strconv.Itoa(next))},
		kgo.RecordHeader{Key: HeaderNotBefore, Value: []byte(strconv.FormatInt(ceilMilli(time.Now().Add(delay)), 10))})
	return s.finishCopy(ctx, e, r)
}

func (s *subscription) SendDeadLetters(ctx context.Context, ids []driver.AckID, reason string) error {
	var errs []error
	for _, id := range ids {
		if err := s.deadLetter(ctx, id, reason); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *subscription) deadLetter(ctx context.Context, id driver.AckID, reason string) error {
	if s.opts.DeadLetterTopic == "" {
		return &codedError{code: driver.Invalid, err: errors.New("kafka: no DeadLetterTopic configured")}
	}
	s.mu.Lock()
	e, ok := lookupLocked(id, stInFlight)
	if !ok {
		s.mu.Unlock()
		return errLockLost
	}
	e.state = stSettling
	s.mu.Unlock()
	if len(reason) > maxReasonLen {
		reason = strings.ToValidUTF8(reason[:maxReasonLen-len("…")], "") + "…"
	}
	r := copyRecord(e.rec, s.opts.DeadLetterTopic)
	src := e.rec.Topic + "/" + strconv.Itoa(int(e.rec.Partition)) + "@" + strconv.FormatInt(e.rec.Offset, 10)
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: driver.HeaderDeadLetterReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDeadLetterSource, Value: []byte(src)})
	return s.finishCopy(ctx, e, r)
}

// finishCopy writes r (a retry or dead-letter copy of e), then settles e as
// acked. If the write fails, e is in flight again and the caller may retry.
func (s *subscription) finishCopy(ctx context.Context, e *entry, r *kgo.Record) error {
	if err := produce(ctx, s.cl, s.auth, []*kgo.Record{r}); err != nil {
		s.mu.Lock()
		if e.state == stSettling {
			e.state = stInFlight
		}
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	lost := e.p.lost
	if e.state == stSettling {
		e.p.settle(e)
		s.markSeq++
	}
	s.signalLocked()
	s.mu.Unlock()
	if lost {
		// The copy is written, but the partition went to another member,
		// which will deliver the original again.
		return errLockLost
	}
	if s.opts.CommitInterval <= 0 {
		return s.commit(ctx)
	}
	return nil
}

// copyRecord copies r for topic, without the driver's retry headers.
func copyRecord(r *kgo.Record, topic string) *kgo.Record {
	c := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: make([]kgo.RecordHeader, 0, len(r.Headers)+2)}
	for _, h := range r.Headers {
		if h.Key != HeaderAttempt && h.Key != HeaderNotBefore && h.Key != driver.HeaderDeadLetterReason && h.Key != HeaderDeadLetterSource {
			c.Headers = append(c.Headers, h)
		}
	}
	return c
}

func (s *subscription) ExtendLocks(context.Context, []driver.AckID, time.Duration) error {
	return &codedError{code: driver.Invalid, err: errors.New("kafka: records are held until settled; there is no lock to extend")}
}

// commit commits the acked prefix of every owned partition that moved, and
// returns once a commit that covers every settle made before the call
// succeeded. Concurrent callers share commits.
func (s *subscription) commit(ctx context.Context) error {
	s.mu.Lock()
	want := s.markSeq
	s.mu.Unlock()
	select {
	case s.commitMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.commitMu }()
	s.mu.Lock()
	if s.commitSeq >= want {
		s.mu.Unlock()
		return nil
	}
	seq := s.markSeq
	pos := s.dirtyLocked(nil)
	s.mu.Unlock()
	if err := s.commitOffsets(ctx, pos); err != nil {
		return err
	}
	s.mu.Lock()
	s.commitSeq = max(s.commitSeq, seq)
	s.mu.Unlock()
	return nil
}

// commitPos is one partition's commit: the offset, and the metadata that
// records the highest offset handed out (for Redelivered after a handover).
type commitPos struct {
	eo   kgo.EpochOffset
	high int64
}

// metaPrefix starts the offset commit metadata the driver writes.
const metaPrefix = "wary:h="

// dirtyLocked returns the commits that would record progress, for the
// partitions in only (nil: every owned partition not being revoked).
func (s *subscription) dirtyLocked(only []*partition) map[*partition]commitPos {
	ps := only
	if ps == nil {
		for _, p := range s.order {
			if !p.revoking && !p.lost {
				ps = append(ps, p)
			}
		}
	}
	var out map[*partition]commitPos
	for _, p := range ps {
		eo, ok := p.position()
		if !ok {
			continue
		}
		high := p.handedHigh
		if high < eo.Offset {
			high = -1 // nothing at or after the commit point was handed out
		}
		if eo.Offset <= p.committed && (high < 0 || high <= p.committedHigh) {
			continue
		}
		if out == nil {
			out = map[*partition]commitPos{}
		}
		out[p] = commitPos{eo, high}
	}
	return out
}

func (s *subscription) commitOffsets(ctx context.Context, pos map[*partition]commitPos) error {
	if len(pos) == 0 {
		return nil
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	meta := map[tp]string{}
	for p, c := range pos {
		if offsets[p.topic] == nil {
			offsets[p.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.topic][p.part] = c.eo
		if c.high >= 0 {
			meta[p.tp] = metaPrefix + strconv.FormatInt(c.high, 10)
		}
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				if m, ok := meta[tp{t.Topic, t.Partitions[j].Partition}]; ok {
					t.Partitions[j].Metadata = &m
				}
			}
		}
		return nil
	})
	var rerr error
	failed := map[tp]bool{}
	s.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					failed[tp{t.Topic, p.Partition}] = true
					if rerr == nil {
						rerr = err
					}
				}
			}
		}
	})
	if rerr != nil && len(failed) == 0 {
		return rerr
	}
	s.mu.Lock()
	for p, c := range pos {
		if !failed[p.tp] {
			p.committed = max(p.committed, c.eo.Offset)
			p.committedHigh = max(p.committedHigh, c.high)
		}
	}
	s.mu.Unlock()
	return rerr
}

// onOffsetsFetched reads the metadata of the committed offsets of newly
// assigned partitions: records up to the high mark were handed out before.
func (s *subscription) onOffsetsFetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	read := func(topic string, part int32, meta *string) {
		if meta == nil || !strings.HasPrefix(*meta, metaPrefix) {
			return
		}
		h, err := strconv.ParseInt(strings.TrimPrefix(*meta, metaPrefix), 10, 64)
		if p := s.parts[tp{topic, part}]; p != nil && err == nil {
			p.redeliverUpTo = h
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			read(t.Topic, p.Partition, p.Metadata)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				read(t.Topic, p.Partition, p.Metadata)
			}
		}
	}
	return nil
}

func (s *subscription) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	for topic, parts := range assigned {
		for _, n := range parts {
			t := tp{topic, n}
			if old := s.parts[t]; old != nil {
				s.dropLocked(old)
			}
			p := newPartition(t, topic == s.opts.RetryTopic && topic != "", s.opts.DeliveryLimit, s.opts.MaxNackDelay)
			s.parts[t] = p
			s.order = append(s.order, p)
		}
	}
	s.signalLocked()
	s.mu.Unlock()
	// A partition paused in an earlier assignment must not stay paused.
	s.pauseMu.Lock()
	cl.ResumeFetchPartitions(assigned)
	s.pauseMu.Unlock()
}

// onRevoked waits (up to RevokeTimeout) for the deliveries in flight on the
// revoked partitions, commits their acked prefix, and forgets them: later
// settles of their deliveries fail with ErrLockLost.
func (s *subscription) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.mu.Lock()
	var ps []*partition
	for topic, parts := range revoked {
		for _, n := range parts {
			if p := s.parts[tp{topic, n}]; p != nil {
				p.revoking = true
				ps = append(ps, p)
			}
		}
	}
	deadline := time.Now().Add(s.opts.RevokeTimeout)
	for !s.closing && time.Now().Before(deadline) && inflight(ps) > 0 {
		wake := s.wake
		s.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-t.C:
		case <-s.closingCh:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
	}
	pos := s.dirtyLocked(ps)
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := s.commitOffsets(cctx, pos)
	cancel()
	s.mu.Lock()
	if err != nil {
		s.logger.Warn("wary/kafka: commit on revoke failed; the records after the last commit will be redelivered",
			slog.String("group", s.group), slog.String("error", err.Error()))
		if s.closing && s.closeErr == nil {
			s.closeErr = err
		}
	}
	for _, p := range ps {
		s.dropLocked(p)
	}
	s.signalLocked()
	s.mu.Unlock()
	s.resumeDropped(cl, revoked)
}

// onLost forgets partitions without committing: the group has given them
// to someone else already.
func (s *subscription) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	for topic, parts := range lost {
		for _, n := range parts {
			if p := s.parts[tp{topic, n}]; p != nil {
				s.dropLocked(p)
			}
		}
	}
	s.signalLocked()
	s.mu.Unlock()
	s.resumeDropped(cl, lost)
}

func (s *subscription) resumeDropped(cl *kgo.Client, m map[string][]int32) {
	s.pauseMu.Lock()
	cl.ResumeFetchPartitions(m)
	s.pauseMu.Unlock()
}

func (s *subscription) dropLocked(p *partition) {
	p.lost = true
	p.recs, p.ready = nil, nil
	delete(s.parts, p.tp)
	for i, q := range s.order {
		if q == p {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

func inflight(ps []*partition) int {
	n := 0
	for _, p := range ps {
		n += p.inflight
	}
	return n
}

// ceilMilli is t in Unix milliseconds, rounded up: a copy is never due
// before the delay.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}
