package sqsfifo_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"

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

// createQueue creates a queue (and its DLQ) on e's server, deleted at
// cleanup; it returns the queue's URL and the DLQ's ("" without).
func (e *testEnv) createQueue(t conformance.T, spec sqsemu.QueueSpec) (string, string) {
	t.Helper()
	return sqsemu.CreateQueue(t, e.client, spec)
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
