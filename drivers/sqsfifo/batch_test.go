package sqsfifo_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/sqsfifo"
)

// fakeSQS answers GetQueueAttributes for a FIFO queue and
// SendMessageBatch as refuse says, and records every batch's entry IDs.
type fakeSQS struct {
	maxSize string
	// refuse decides, per request number and entry index, whether the
	// entry is refused (and with which SenderFault), or (entry -1) the
	// whole request gets a 500.
	refuse func(req, entry int) (refused, senderFault bool)
	fail   func(req int) bool

	mu      sync.Mutex
	batches [][]string // message IDs (dedup IDs) per request
}

func (f *fakeSQS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	var in map[string]any
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	switch op {
	case "GetQueueAttributes":
		_ = json.NewEncoder(w).Encode(map[string]any{"Attributes": map[string]string{
			"FifoQueue": "true", "VisibilityTimeout": "30", "MaximumMessageSize": f.maxSize, "MessageRetentionPeriod": "60"}})
	case "SendMessageBatch":
		f.mu.Lock()
		req := len(f.batches)
		var ids []string
		entries, _ := in["Entries"].([]any)
		for _, e := range entries {
			ids = append(ids, e.(map[string]any)["MessageDeduplicationId"].(string))
		}
		f.batches = append(f.batches, ids)
		f.mu.Unlock()
		if f.fail != nil && f.fail(req) {
			w.Header().Set("X-Amzn-Query-Error", "InternalError;Receiver")
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#InternalError","message":"boom"}`))
			return
		}
		var ok, failed []map[string]any
		for i, e := range entries {
			id := e.(map[string]any)["Id"].(string)
			if refused, sf := f.refuse(req, i); refused {
				code := "InternalError"
				if sf {
					code = "InvalidParameterValue"
				}
				failed = append(failed, map[string]any{"Id": id, "Code": code, "Message": "refused", "SenderFault": sf})
				continue
			}
			ok = append(ok, map[string]any{"Id": id, "MessageId": "m" + id, "MD5OfMessageBody": "x", "SequenceNumber": "1"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Successful": ok, "Failed": failed})
	default:
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#UnsupportedOperation","message":"no"}`))
	}
}

func fakeClient(t *testing.T, f *fakeSQS) *sqs.Client {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return sqs.New(sqs.Options{
		Region:                           "us-east-1",
		BaseEndpoint:                     aws.String(srv.URL),
		Credentials:                      credentials.NewStaticCredentialsProvider("a", "b", ""),
		Retryer:                          aws.NopRetryer{},
		DisableMessageChecksumValidation: true,
	})
}

func msgs(n, size int) []*broker.Message {
	out := make([]*broker.Message, n)
	for i := range out {
		out[i] = &broker.Message{ID: "id-" + string(rune('a'+i)), Key: "g", Body: []byte(strings.Repeat("x", size))}
	}
	return out
}

// TestBatchPartialFailure: SQS refuses one entry of a batch for its own
// fault: without retries, the publish may have been sent as a whole, and
// says message by message which were sent, and that the refused one was
// not, retryable, with SQS's code behind it. With retries, only the
// refused message is sent again.
func TestBatchPartialFailure(t *testing.T) {
	f := &fakeSQS{maxSize: "262144", refuse: func(req, i int) (bool, bool) { return req == 0 && i == 1, false }}
	once := &sqsfifo.TopicOptions{TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}}}
	top, err := sqsfifo.OpenTopic(t.Context(), fakeClient(t, f), "https://sqs.example/000/q.fifo", once)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	err = top.Publish(context.Background(), msgs(3, 10)...)
	var be *broker.Error
	if !errors.As(err, &be) || !errors.Is(err, broker.ErrMaybeSent) || errors.Is(err, broker.ErrNotSent) || len(be.Messages) != 3 {
		t.Fatalf("partial failure: %v, want ErrMaybeSent with 3 Messages", err)
	}
	if be.Messages[0] != nil || be.Messages[2] != nil {
		t.Fatalf("messages 0 and 2 were sent: %v", be.Messages)
	}
	var ee *sqsfifo.EntryError
	if m := be.Messages[1]; !errors.Is(m, broker.ErrNotSent) || !errors.Is(m, broker.ErrRetryable) || !top.ErrorAs(m, &ee) ||
		ee.Code != "InternalError" || ee.SenderFault || ee.ID != msgs(3, 10)[1].ID {
		t.Fatalf("refused entry: %v (%+v)", m, ee)
	}
	if len(f.batches) != 1 {
		t.Fatalf("%d requests, want 1", len(f.batches))
	}
	retrying, err := sqsfifo.OpenTopic(t.Context(), fakeClient(t, f), "https://sqs.example/000/q.fifo", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer retrying.Close()
	f.batches = nil
	if err := retrying.Publish(context.Background(), msgs(3, 10)...); err != nil {
		t.Fatalf("publish with retries: %v", err)
	}
	if len(f.batches) != 2 || len(f.batches[1]) != 1 {
		t.Fatalf("requests of %d entries, want 3 then the refused one alone", len(f.batches))
	}

	// Refused for the sender's fault only: not sent, not retryable.
	f2 := &fakeSQS{maxSize: "262144", refuse: func(req, i int) (bool, bool) { return true, true }}
	top2, err := sqsfifo.OpenTopic(t.Context(), fakeClient(t, f2), "https://sqs.example/000/q.fifo", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer top2.Close()
	err = top2.Publish(context.Background(), msgs(2, 10)...)
	if !errors.Is(err, broker.ErrNotSent) || errors.Is(err, broker.ErrRetryable) {
		t.Fatalf("all refused: %v, want ErrNotSent, not retryable", err)
	}
}

// TestBatchSplitBySize: a batch is cut into requests of at most ten
// entries whose encoded sizes fit the queue's MaximumMessageSize; a
// failure of the second request leaves the first sent and the rest not.
func TestBatchSplitBySize(t *testing.T) {
	f := &fakeSQS{maxSize: "1024", refuse: func(int, int) (bool, bool) { return false, false }}
	top, err := sqsfifo.OpenTopic(t.Context(), fakeClient(t, f), "https://sqs.example/000/q.fifo", &sqsfifo.TopicOptions{TopicOptions: broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	if got := top.Capabilities().MaxMessageSize; got != 1024-256 {
		t.Fatalf("MaxMessageSize %d", got)
	}
	if err := top.Publish(context.Background(), msgs(5, 400)...); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range f.batches {
		sizes = append(sizes, len(b))
	}
	if len(sizes) != 3 || sizes[0] != 2 || sizes[1] != 2 || sizes[2] != 1 {
		t.Fatalf("requests of %v entries, want [2 2 1]", sizes)
	}
	f.batches = nil
	f.fail = func(req int) bool { return req == 1 }
	err = top.Publish(context.Background(), msgs(5, 400)...)
	var be *broker.Error
	if !errors.As(err, &be) || !errors.Is(err, broker.ErrMaybeSent) || len(be.Messages) != 5 {
		t.Fatalf("second request failed: %v", err)
	}
	for i, m := range be.Messages {
		switch {
		case i < 2 && m != nil:
			t.Errorf("message %d was sent: %v", i, m)
		case (i == 2 || i == 3) && !errors.Is(m, broker.ErrMaybeSent):
			t.Errorf("message %d was in the failed request: %v, want maybe sent", i, m)
		case i == 4 && !errors.Is(m, broker.ErrNotSent):
			t.Errorf("message %d was not attempted: %v, want not sent", i, m)
		}
	}
	// A body whose base64 form is over the queue's limit: refused before
	// anything is sent, although its raw size fits the declared limit.
	f.batches = nil
	bin := &broker.Message{ID: "bin", Key: "g", Body: []byte(strings.Repeat("\xff", 760))}
	if err := top.Publish(context.Background(), bin); !errors.Is(err, broker.ErrTooLarge) || !errors.Is(err, broker.ErrNotSent) {
		t.Fatalf("oversized once encoded: %v", err)
	}
	if len(f.batches) != 0 {
		t.Fatal("an oversized message reached SQS")
	}
}
