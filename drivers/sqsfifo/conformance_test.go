package sqsfifo_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// confDedupWindow is the deduplication window the conformance run's fauxqs
// is started with (its launcher shortens fauxqs's 5-minute constant), so
// that "a duplicate is accepted after the window" fits in the suite's
// MaxWait. Against WARY_SQS_ENDPOINT the window is AWS's 5 minutes and
// that scenario is reported as not applicable.
const confDedupWindow = 3 * time.Second

// confRetention is the MessageRetentionPeriod of every conformance queue.
const confRetention = 2 * 24 * time.Hour

// TestConformance runs the conformance suite on fresh FIFO queues (with a
// FIFO dead-letter queue and a RedrivePolicy) per scenario, on fauxqs or
// on WARY_SQS_ENDPOINT.
//
// What fauxqs does not do (DeduplicationScope=messageGroup, honouring
// ReceiveRequestAttemptId, more than one message of a group per receive)
// is outside the suite's scenarios, or covered by the tests of this
// package that run only with WARY_SQS_ENDPOINT and say so when skipped.
func TestConformance(t *testing.T) {
	e := newTestEnv(t, sqsemu.Options{DedupWindow: confDedupWindow})
	// The suite checks that no goroutine outlives it: the client's idle
	// keep-alive connections are closed when each scenario ends.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client := e.srv.NewClient(t, func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: tr} })
	e.client = client
	so := &sqsfifo.SubscriptionOptions{WaitTime: time.Second, DedupWindow: e.srv.DedupWindow}
	to := &sqsfifo.TopicOptions{DedupWindow: e.srv.DedupWindow}
	name, fixed := "sqsfifo/fauxqs", ""
	if e.srv.Real {
		name = "sqsfifo/" + e.srv.Endpoint
		fixed = "SQS's deduplication window is fixed at 5 minutes"
	}
	conformance.Run(t, conformance.Harness{
		Name:       name,
		Quiet:      time.Second,
		FixedWaits: fixed,
		// Every queue keeps messages confRetention: the horizon the
		// driver must read from MessageRetentionPeriod.
		RedeliveryHorizon: confRetention,
		Setup: func(ctx context.Context, tb conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
			tb.Cleanup(tr.CloseIdleConnections)
			// At least 3s: the head-of-line scenario holds a delivery
			// through two Quiet periods (2s) and must not see its lock
			// expire meanwhile.
			lock := max(cfg.LockTimeout, 3*time.Second)
			url, _ := e.createQueue(tb, sqsemu.QueueSpec{Visibility: lock, MaxReceive: max(cfg.DeliveryLimit, 1), Retention: confRetention, NamePrefix: "conf"})
			top, err := sqsfifo.OpenTopic(ctx, client, url, to)
			if err != nil {
				return nil, err
			}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return sqsfifo.OpenSubscription(ctx, client, url, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return sqsfifo.OpenDeadLetters(ctx, client, url, so)
				},
			}, nil
		},
		OpenMissingTopic: func(ctx context.Context) (*broker.Topic, error) {
			return sqsfifo.OpenTopic(ctx, client, sqsemu.UniqueName("missing")+".fifo", to)
		},
		OpenMissingSubscription: func(ctx context.Context) (*broker.Subscription, error) {
			return sqsfifo.OpenSubscription(ctx, client, sqsemu.UniqueName("missing")+".fifo", so)
		},
	})
}
