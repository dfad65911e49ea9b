package sqsfifo_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// testEnv is one emulator (or WARY_SQS_ENDPOINT) and a client.
type testEnv struct {
	srv    *sqsemu.Server
	client *sqs.Client
}

// shared is the fauxqs most tests of the package use, started on first
// use and stopped by TestMain.
var shared struct {
	once sync.Once
	srv  *sqsemu.Server
	stop func()
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	os.Exit(code)
}

// newTestEnv returns the shared server, or, when opts ask for something
// (a shortened dedup window), a server of the test's own.
func newTestEnv(t conformance.T, opts sqsemu.Options) *testEnv {
	t.Helper()
	var srv *sqsemu.Server
	if opts == (sqsemu.Options{}) {
		shared.once.Do(func() { shared.srv, shared.stop, shared.err = sqsemu.Launch(opts) })
		if shared.err != nil {
			var u *sqsemu.UnavailableError
			if errors.As(shared.err, &u) {
				sqsemu.Unavailable(t, "%v", shared.err)
			}
			t.Fatal(shared.err)
		}
		srv = shared.srv
	} else {
		srv = sqsemu.Start(t, opts)
	}
	return &testEnv{srv: srv, client: srv.NewClient(t, nil)}
}

// realOnly skips a test of what fauxqs does not do unless
// WARY_SQS_ENDPOINT is set, before any server is started.
func realOnly(t *testing.T, what string) {
	t.Helper()
	if os.Getenv(sqsemu.EnvEndpoint) == "" {
		t.Skipf("fauxqs %s; runs only with %s set (LocalStack or AWS)", what, sqsemu.EnvEndpoint)
	}
}

func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// queueSpec is what createQueue makes.
type queueSpec struct {
	visibility   time.Duration // default 30s
	maxReceive   int           // > 0: a FIFO DLQ and a RedrivePolicy
	standard     bool          // a standard queue (to prove it is refused)
	dedupScope   string        // "queue" or "messageGroup"
	retention    time.Duration
	maxSize      int
	contentDedup bool
	namePrefix   string
}

// createQueue creates a queue (and its DLQ), deleted at cleanup; it
// returns the queue's URL and the DLQ's ("" without).
func (e *testEnv) createQueue(t conformance.T, spec queueSpec) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := spec.namePrefix
	if prefix == "" {
		prefix = "wary"
	}
	name := uniqueName(prefix)
	attrs := map[string]string{}
	if !spec.standard {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
		if spec.contentDedup {
			attrs["ContentBasedDeduplication"] = "true"
		}
		if spec.dedupScope != "" {
			attrs["DeduplicationScope"] = spec.dedupScope
			if spec.dedupScope == "messageGroup" {
				attrs["FifoThroughputLimit"] = "perMessageGroupId"
			}
		}
	}
	if spec.visibility > 0 {
		attrs["VisibilityTimeout"] = strconv.Itoa(int(spec.visibility / time.Second))
	}
	if spec.retention > 0 {
		attrs["MessageRetentionPeriod"] = strconv.Itoa(int(spec.retention / time.Second))
	}
	if spec.maxSize > 0 {
		attrs["MaximumMessageSize"] = strconv.Itoa(spec.maxSize)
	}
	var dlqURL string
	if spec.maxReceive > 0 {
		dlqName := "dlq-" + name
		dlq, err := e.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(dlqName),
			Attributes: map[string]string{"FifoQueue": "true"}})
		if err != nil {
			t.Fatalf("create DLQ: %v", err)
		}
		dlqURL = aws.ToString(dlq.QueueUrl)
		e.deleteAtCleanup(t, dlqURL)
		a, err := e.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatalf("DLQ ARN: %v", err)
		}
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`,
			a.Attributes["QueueArn"], spec.maxReceive)
	}
	out, err := e.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	url := aws.ToString(out.QueueUrl)
	e.deleteAtCleanup(t, url)
	return url, dlqURL
}

func (e *testEnv) deleteAtCleanup(t conformance.T, url string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
}

// count returns how many messages the queue holds (visible or not), read
// through the raw SDK.
func (e *testEnv) count(ctx context.Context, t conformance.T, url string) int {
	t.Helper()
	out, err := e.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	a, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	b, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return a + b
}
