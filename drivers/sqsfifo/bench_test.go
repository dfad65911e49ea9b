package sqsfifo_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
	"github.com/wary-go/wary/internal/benchpair"
)

// The benchmarks compare wary with the raw SDK doing the same work on the
// same kind of queue (FIFO, 16 message groups): publish in batches of ten
// (SendMessageBatch with group, deduplication ID and one String attribute)
// and consume (ReceiveMessage of up to ten, then delete each message). The
// two alternate in rounds inside one benchmark, so that both see the same
// load on the machine; b.N counts messages per side. Each reports
// wary-msgs/s, sdk-msgs/s and wary/sdk in percent.
//
//	go test -run '^$' -bench . -benchtime 2000x ./drivers/sqsfifo/

const (
	benchGroups = 16
	benchBody   = 256
)

var benchSeq atomic.Int64

func benchID() string {
	return "b" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(benchSeq.Add(1), 10)
}

func benchMessages(n int) []*broker.Message {
	body := make([]byte, benchBody)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	msgs := make([]*broker.Message, n)
	for i := range msgs {
		msgs[i] = &broker.Message{ID: benchID(), Key: "g" + strconv.Itoa(i%benchGroups), Body: body, Headers: broker.Headers{{"h", "v"}}}
	}
	return msgs
}

func rawSend(ctx context.Context, b *testing.B, c *sqs.Client, url string, n int) {
	body := string(benchMessages(1)[0].Body)
	entries := make([]types.SendMessageBatchRequestEntry, 0, 10)
	for i := 0; i < n; i += 10 {
		entries = entries[:0]
		for j := i; j < min(i+10, n); j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(j - i)), MessageBody: aws.String(body),
				MessageGroupId: aws.String("g" + strconv.Itoa(j%benchGroups)), MessageDeduplicationId: aws.String(benchID()),
				MessageAttributes: map[string]types.MessageAttributeValue{"h": {DataType: aws.String("String"), StringValue: aws.String("v")}},
			})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			b.Fatalf("raw send: %v %v", err, out)
		}
	}
}

// The median of per-round rates is the figure to compare on fauxqs: now
// and then a ReceiveMessage answer fails mid-body on this machine ("use of
// closed network connection", seen with the raw SDK alone and a plain
// net/http transport), the SDK retries it, and fauxqs, which ignores
// ReceiveRequestAttemptId, keeps the first attempt's messages invisible for
// the visibility timeout; that one round then stalls, on either side.

func BenchmarkPublish(b *testing.B) {
	e := newTestEnv(b, sqsemu.Options{})
	ctx := context.Background()
	wurl, _ := e.createQueue(b, sqsemu.QueueSpec{NamePrefix: "bench"})
	rurl, _ := e.createQueue(b, sqsemu.QueueSpec{NamePrefix: "bench"})
	topic, err := sqsfifo.OpenTopic(ctx, e.client, wurl, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer topic.Close()
	benchpair.Run(b, 100, func(n int) {
		for i := 0; i < n; i += 10 {
			if err := topic.Publish(ctx, benchMessages(min(10, n-i))...); err != nil {
				b.Fatal(err)
			}
		}
	}, func(n int) { rawSend(ctx, b, e.client, rurl, n) })
}

func BenchmarkConsume(b *testing.B) {
	e := newTestEnv(b, sqsemu.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wurl, _ := e.createQueue(b, sqsemu.QueueSpec{NamePrefix: "bench"})
	rurl, _ := e.createQueue(b, sqsemu.QueueSpec{NamePrefix: "bench"})
	rawSend(ctx, b, e.client, wurl, b.N)
	rawSend(ctx, b, e.client, rurl, b.N)
	sub, err := sqsfifo.OpenSubscription(ctx, e.client, wurl, &sqsfifo.SubscriptionOptions{WaitTime: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	benchpair.Run(b, 100, func(n int) {
		for got := 0; got < n; {
			ds, err := sub.Receive(ctx, min(10, n-got))
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range ds {
				if err := d.Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
			got += len(ds)
		}
	}, func(n int) {
		for got := 0; got < n; {
			out, err := e.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl: aws.String(rurl), MaxNumberOfMessages: int32(min(10, n-got)), WaitTimeSeconds: 1,
				MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
				MessageAttributeNames:       []string{"All"},
			})
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range out.Messages {
				if _, err := e.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(rurl), ReceiptHandle: m.ReceiptHandle}); err != nil {
					b.Fatal(err)
				}
			}
			got += len(out.Messages)
		}
	})
}
