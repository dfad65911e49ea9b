package sqsfifo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker/driver"
)

// receive is the subscription's poll (driver.Poller): one ReceiveMessage
// long poll. The Poller lets a poll abandoned by its caller (a context
// canceled while it waits) run to its end: SQS made the messages it took
// invisible and holds their groups, and canceling the HTTP request would
// hide them from everyone until the visibility timeout.
//
// A poll that fails is retried with the same ReceiveRequestAttemptId, so
// that SQS (which honours it for five minutes) returns the messages the
// lost answer carried instead of hiding them. ctx ends at Close.
func (s *subscription) receive(ctx context.Context, maxMessages int) ([]types.Message, error) {
	id := s.retry
	s.retry = ""
	if id == "" {
		id = newAttemptID()
	}
	out, err := s.q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(s.q.url),
		MaxNumberOfMessages:         int32(min(max(maxMessages, 1), MaxBatchSize)),
		WaitTimeSeconds:             s.wait,
		MessageSystemAttributeNames: receiveAttrs,
		MessageAttributeNames:       []string{"All"},
		ReceiveRequestAttemptId:     aws.String(id),
	})
	if err != nil {
		s.retry = id
		return nil, err
	}
	return out.Messages, nil
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

// ReceiveBatch long-polls for up to maxMessages (at most ten) messages.
// Messages held longer than half the visibility timeout are dropped: SQS
// delivers them again once it expires, and a handler would have little
// time left.
func (s *subscription) ReceiveBatch(ctx context.Context, maxMessages int) ([]*driver.Message, error) {
	raws, err := s.poller.Receive(ctx, maxMessages)
	if err != nil {
		return nil, err
	}
	return s.decodeAll(raws), nil
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
				Headers: driver.Headers{{"wary-decode-error", err.Error()}}}
		}
		if s.defaultReason != "" && m.Headers.Get(AttrDeadLetterReason) == "" {
			m.Headers.Set(AttrDeadLetterReason, s.defaultReason)
		}
		a := &ackID{handle: aws.ToString(raw.ReceiptHandle), raw: raw}
		m.AckID, m.As = a, a
		msgs = append(msgs, m)
	}
	return msgs
}

// closeReceiver waits for the poll in flight, bounded by the long-poll
// time plus a margin, then releases what no caller took.
func (s *subscription) closeReceiver() error {
	left := s.poller.Close(time.Duration(s.wait)*time.Second + 5*time.Second)
	if len(left) == 0 {
		return nil
	}
	ids := make([]driver.AckID, len(left))
	for i, r := range left {
		ids[i] = &ackID{handle: aws.ToString(r.ReceiptHandle), raw: r}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.changeVisibility(ctx, ids, 0)
}
