package cli

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/sqsfifo"
	"github.com/wary-go/wary/redact"
)

// sqsRetention is the MessageRetentionPeriod of probe queues, and so the
// horizon the driver must declare.
const sqsRetention = 4 * 24 * time.Hour

// sqsHarness probes SQS FIFO (region=, endpoint= or $WARY_SQS_ENDPOINT,
// credentials from the SDK's default chain): each scenario gets a scratch
// FIFO queue with a FIFO dead-letter queue and a RedrivePolicy, deleted
// when it ends. dedup_window= is the window the server applies (AWS's is
// 5 minutes, too long to wait out: that scenario is then not applicable).
func sqsHarness(ctx context.Context, u *url.URL, getenv func(string) string) (conformance.Harness, func(), error) {
	q := u.Query()
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = getenv(EnvSQS)
	}
	window := 5 * time.Minute
	if w := q.Get("dedup_window"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			return conformance.Harness{}, nil, fmt.Errorf("probe: dedup_window: %w", err)
		}
		window = d
	}
	var lo []func(*config.LoadOptions) error
	if r := q.Get("region"); r != "" {
		lo = append(lo, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return conformance.Harness{}, nil, fmt.Errorf("probe: AWS configuration: %w", err)
	}
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	deleteAtEnd := func(t conformance.T, url string) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		})
	}
	so := &sqsfifo.SubscriptionOptions{WaitTime: time.Second, DedupWindow: window}
	h := conformance.Harness{
		Name:              "probe " + redact.URL(u),
		Quiet:             time.Second,
		RedeliveryHorizon: sqsRetention,
		FixedWaits:        "the server's deduplication window is fixed (AWS: 5 minutes); give dedup_window= if yours is shorter",
		Setup: func(ctx context.Context, t conformance.T, c conformance.Config) (*conformance.Fixture, error) {
			name := scratchName("wary-probe")
			// At least 3s: head-of-line holds a delivery through two Quiet
			// periods and must not see its lock expire meanwhile.
			lock := max(c.LockTimeout, 3*time.Second)
			main, dlq, err := sqsfifo.CreateQueue(ctx, client, name+".fifo", name+"-dlq.fifo",
				sqsfifo.QueueSpec{Visibility: lock, MaxReceive: max(c.DeliveryLimit, 1), Retention: sqsRetention})
			for _, u := range []string{dlq, main} {
				if u != "" {
					deleteAtEnd(t, u)
				}
			}
			if err != nil {
				return nil, err
			}
			top, err := sqsfifo.OpenTopic(ctx, client, main, &sqsfifo.TopicOptions{DedupWindow: window})
			if err != nil {
				return nil, err
			}
			return &conformance.Fixture{
				Topic: top,
				Subscribe: func(ctx context.Context) (*broker.Subscription, error) {
					return sqsfifo.OpenSubscription(ctx, client, main, so)
				},
				DeadLetters: func(ctx context.Context) (*broker.Subscription, error) {
					return sqsfifo.OpenDeadLetters(ctx, client, main, so)
				},
			}, nil
		},
	}
	return h, func() {}, nil
}
