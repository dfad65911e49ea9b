package sqsfifo_test

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// testEnv is one emulator (or WARY_SQS_ENDPOINT) and a client.
type testEnv struct {
	srv    *sqsemu.Server
	client *sqs.Client
}

// newTestEnv starts a server of the test's own.
func newTestEnv(t conformance.T, opts sqsemu.Options) *testEnv {
	t.Helper()
	srv := sqsemu.Start(t, opts)
	return &testEnv{srv: srv, client: srv.NewClient(t, nil)}
}

// createQueue creates a queue (and its DLQ) on e's server, deleted at
// cleanup; it returns the queue's URL and the DLQ's ("" without).
func (e *testEnv) createQueue(t conformance.T, spec sqsemu.QueueSpec) (string, string) {
	t.Helper()
	return sqsemu.CreateQueue(t, e.client, spec)
}
