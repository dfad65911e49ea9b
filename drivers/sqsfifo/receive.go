package sqsfifo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker/driver"
)

// receiver runs ReceiveMessage calls that outlive the ReceiveBatch that
// started them. A long poll abandoned by its caller (a context canceled
// while it waits) may still have taken messages: SQS made them invisible
// and holds their groups. Canceling the HTTP request would hide them from
// everyone until the visibility timeout; instead the poll runs to its end
// (at most WaitTime) and the next ReceiveBatch gets what it brought.
//
// A poll that fails is retried by the next ReceiveBatch with the same
// ReceiveRequestAttemptId, so that SQS (which honours it for five minutes)
// returns the messages the lost answer carried instead of hiding them.
type receiver struct {
	bg     context.Context // ends the polls at Close
	stopBG context.CancelFunc

	mu       sync.Mutex
	inflight *poll
	stash    []received // brought by a poll, not yet handed out
	retry    string     // attempt ID of a failed poll, to reuse once
	closed   bool
	wg       sync.WaitGroup
}

type poll struct {
	done chan struct{}
	msgs []types.Message
	err  error
	id   string
	at   time.Time
}

type received struct {
	raw types.Message
	at  time.Time // when the poll returned: the visibility clock runs from about then
}

var receiveAttrs = []types.MessageSystemAttributeName{
	types.MessageSystemAttributeNameApproximateReceiveCount,
	types.MessageSystemAttributeNameSentTimestamp,
	types.MessageSystemAttributeNameMessageGroupId,
	types.MessageSystemAttributeNameMessageDeduplicationId,
}

func newAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start begins a poll; s.mu is held.
func (s *subscription) start(maxMessages int) *poll {
	id := s.retry
	s.retry = ""
	if id == "" {
		id = newAttemptID()
	}
	p := &poll{done: make(chan struct{}), id: id}
	s.inflight = p
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(p.done)
		out, err := s.q.client.ReceiveMessage(s.bg, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(s.q.url),
			MaxNumberOfMessages:         int32(min(max(maxMessages, 1), MaxBatchSize)),
			WaitTimeSeconds:             s.wait,
			MessageSystemAttributeNames: receiveAttrs,
			MessageAttributeNames:       []string{"All"},
			ReceiveRequestAttemptId:     aws.String(id),
		})
		p.at = time.Now() // SQS started the visibility timeout about now
		if err != nil {
			p.err = err
			return
		}
		p.msgs = out.Messages
	}()
	return p
}

// collect moves a finished poll's result into the stash; s.mu is held.
// It returns the poll's error the first time only.
func (s *subscription) collect(p *poll) error {
	if s.inflight != p {
		return nil
	}
	s.inflight = nil
	if p.err != nil {
		s.retry = p.id
		return p.err
	}
	for _, m := range p.msgs {
		s.stash = append(s.stash, received{raw: m, at: p.at})
	}
	return nil
}

// take hands out up to n stashed messages; s.mu is held. Messages held
// longer than half the visibility timeout are dropped: SQS delivers them
// again once it expires, and a handler would have little time left.
func (s *subscription) take(n int) []types.Message {
	var out []types.Message
	fresh := s.q.sub.LockTimeout / 2
	for len(s.stash) > 0 && len(out) < n {
		r := s.stash[0]
		s.stash = s.stash[1:]
		if fresh > 0 && time.Since(r.at) > fresh {
			continue
		}
		out = append(out, r.raw)
	}
	return out
}

// ReceiveBatch long-polls for up to maxMessages (at most ten) messages.
func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		if raws := s.take(maxMessages); len(raws) > 0 {
			s.mu.Unlock()
			return s.decodeAll(raws), nil
		}
		p := s.inflight
		if p == nil {
			p = s.start(maxMessages)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.done:
		}
		s.mu.Lock()
		err := s.collect(p)
		raws := s.take(maxMessages)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if len(raws) > 0 || len(p.msgs) == 0 {
			// An empty poll ends the call: the portable layer calls again.
			return s.decodeAll(raws), nil
		}
	}
}

func (s *subscription) decodeAll(raws []types.Message) []*driver.Message {
	msgs := make([]*driver.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := decode(raw, s.defaultReason != "")
		if err != nil {
			// A message the driver cannot read is still delivered, raw,
			// so that the handler can dead-letter it.
			m = &driver.Message{ID: aws.ToString(raw.MessageId), Body: []byte(aws.ToString(raw.Body)),
				Key: raw.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)], Attempt: 1,
				Headers: map[string]string{"wary-decode-error": err.Error()}}
		}
		if s.defaultReason != "" && m.Headers[AttrDeadLetterReason] == "" {
			m.Headers[AttrDeadLetterReason] = s.defaultReason
		}
		raw := raw
		m.AckID = &ackID{handle: aws.ToString(raw.ReceiptHandle), raw: raw}
		m.AsFunc = func(i any) bool {
			if p, ok := i.(*types.Message); ok {
				*p = raw
				return true
			}
			return false
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// closeReceiver waits for the poll in flight, bounded by the long-poll
// time plus a margin, then releases what no caller took.
func (s *subscription) closeReceiver() error {
	s.mu.Lock()
	s.closed = true
	p := s.inflight
	s.mu.Unlock()
	if p != nil {
		t := time.NewTimer(time.Duration(s.wait)*time.Second + 5*time.Second)
		select {
		case <-p.done:
		case <-t.C:
		}
		t.Stop()
	}
	s.stopBG()
	s.wg.Wait()
	s.mu.Lock()
	if p != nil {
		_ = s.collect(p)
	}
	left := s.stash
	s.stash = nil
	s.mu.Unlock()
	if len(left) == 0 {
		return nil
	}
	ids := make([]driver.AckID, len(left))
	for i, r := range left {
		ids[i] = &ackID{handle: aws.ToString(r.raw.ReceiptHandle), raw: r.raw}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.changeVisibility(ctx, ids, 0)
}
