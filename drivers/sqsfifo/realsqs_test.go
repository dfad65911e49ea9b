package sqsfifo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// The tests in this file prove what fauxqs does not do; they run only
// against WARY_SQS_ENDPOINT (LocalStack or AWS) and say so when skipped.

// TestGroupScopedDedup: with DeduplicationScope=messageGroup the same ID
// in two groups is two messages, and the capability says so.
func TestGroupScopedDedup(t *testing.T) {
	realOnly(t, "deduplicates across groups whatever DeduplicationScope says")
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 10 * time.Second, DedupScope: "messageGroup"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if top.Capabilities().DedupScope != capability.DedupMessageGroup {
		t.Fatalf("caps %s", top.Capabilities())
	}
	sub, err := sqsfifo.OpenSubscription(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, g := range []string{"g1", "g2", "g1"} {
		if err := top.Publish(ctx, &broker.Message{ID: "same", Key: g, Body: []byte(g)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for len(seen) < 2 {
		d := receiveOne(ctx, t, sub)
		seen[d.Message.Key]++
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	if ds, err := sub.Receive(rctx, 1); err == nil {
		t.Fatalf("the duplicate in g1 was delivered: %s", ds[0].Message.Key)
	}
}

// TestManyOfAGroupPerReceive: SQS hands out several messages of a group in
// one receive; they come in publish order.
func TestManyOfAGroupPerReceive(t *testing.T) {
	realOnly(t, "returns at most one message of a group per receive")
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(ctx, e.client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var ms []*broker.Message
	for i := 0; i < 10; i++ {
		ms = append(ms, &broker.Message{ID: fmt.Sprintf("m%d", i), Key: "g", Body: []byte(strconv.Itoa(i))})
	}
	if err := top.Publish(ctx, ms...); err != nil {
		t.Fatal(err)
	}
	next, most := 0, 0
	for next < len(ms) {
		ds, err := sub.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, len(ds))
		for _, d := range ds {
			if d.Message.ID != ms[next].ID {
				t.Fatalf("got %s, want %s", d.Message.ID, ms[next].ID)
			}
			next++
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if most < 2 {
		t.Fatalf("never more than one message of the group per receive")
	}
}

// lossyTransport loses the answer of the first ReceiveMessage that brings
// messages: the request reached SQS, which made them invisible.
type lossyTransport struct {
	base    http.RoundTripper
	dropped atomic.Bool
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil || r.Header.Get("X-Amz-Target") != "AmazonSQS.ReceiveMessage" || l.dropped.Load() {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if len(body) < 20 { // {} or {"Messages":[]}
		resp.Body = io.NopCloser(bytesReader(body))
		return resp, nil
	}
	l.dropped.Store(true)
	return nil, errors.New("injected: the ReceiveMessage answer was lost")
}

// TestReceiveAttemptIDRecoversLostAnswer: the answer of a receive is lost
// after SQS made its messages invisible (30 s); the next receive reuses
// the ReceiveRequestAttemptId and SQS returns the same messages at once,
// instead of hiding the group until the visibility timeout.
func TestReceiveAttemptIDRecoversLostAnswer(t *testing.T) {
	realOnly(t, "ignores ReceiveRequestAttemptId")
	e := newTestEnv(t, sqsemu.Options{})
	url, _ := e.createQueue(t, sqsemu.QueueSpec{Visibility: 30 * time.Second})
	lt := &lossyTransport{base: http.DefaultTransport}
	client := e.srv.NewClient(t, func(o *sqs.Options) {
		o.HTTPClient = &http.Client{Transport: lt}
		o.Retryer = aws.NopRetryer{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	top, err := sqsfifo.OpenTopic(ctx, client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := sqsfifo.OpenSubscription(ctx, client, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "a1", Key: "g", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var d *broker.Delivery
	for d == nil {
		ds, err := sub.Receive(ctx, 1)
		if err == nil {
			d = ds[0]
		} else if !errors.Is(err, broker.ErrRetryable) && ctx.Err() == nil {
			// the portable layer returns transient receive errors as they are
			t.Logf("receive: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatal("not received")
		}
	}
	if !lt.dropped.Load() {
		t.Fatal("the fault did not fire")
	}
	if d.Message.ID != "a1" {
		t.Fatalf("got %s", d.Message.ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func bytesReader(b []byte) io.Reader { return &byteReader{b: b} }

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
