package sqsfifo

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Scheme is the URL scheme the package registers on broker.DefaultURLMux:
// sqsfifo://QUEUE-NAME.fifo?region=REGION&endpoint=URL.
const Scheme = "sqsfifo"

func init() {
	o := &URLOpener{}
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens sqsfifo:// URLs. Each topic or subscription it opens
// builds its own client with the SDK's default configuration chain
// (environment, shared config and credentials files, SSO, instance and
// container roles); credentials never appear in URLs, errors or logs.
//
// Parameters: region (default: the chain's, AWS_REGION), endpoint (an
// SQS endpoint URL, e.g. LocalStack's http://127.0.0.1:4566; default:
// AWS's for the region), dedup_window (a duration, TopicOptions.DedupWindow)
// and, for subscriptions, wait_time (a duration up to 20s,
// SubscriptionOptions.WaitTime). max_receive (an integer, the
// RedrivePolicy's maxReceiveCount) and visibility (a duration, the
// VisibilityTimeout) say how PlanTopologyURL declares the queue; a
// subscription compares them with the queue's attributes and reports a
// difference as a conflict in its capabilities' Source (the queue's value
// applies). The host (with any path) is the queue's name. Any other parameter, and a malformed value, is an error matching
// broker.ErrInvalid that does not repeat the value.
type URLOpener struct {
	// Configure, if not nil, adjusts the client options of every client
	// the opener builds (an HTTP client, a retryer).
	Configure func(*sqs.Options)
}

// target reads the queue name, region and endpoint of u.
func target(u *url.URL, p *driver.URLParams) (name, region, endpoint string, err error) {
	p.NoUserinfo()
	name = u.Host + strings.TrimSuffix(u.Path, "/")
	if u.Opaque != "" {
		name = u.Opaque
	}
	if name == "" {
		return "", "", "", driver.Invalidf("sqsfifo: the URL names no queue (sqsfifo://NAME.fifo)")
	}
	region, endpoint = p.Get("region"), p.Get("endpoint")
	if endpoint != "" {
		if eu, err := url.Parse(endpoint); err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return "", "", "", driver.Invalidf("sqsfifo: URL parameter endpoint is not an http(s) URL")
		}
	}
	return name, region, endpoint, nil
}

func (o *URLOpener) newClient(ctx context.Context, region, endpoint string) (*sqs.Client, error) {
	var lo []func(*config.LoadOptions) error
	if region != "" {
		lo = append(lo, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		// The chain's errors name files and profiles, not secrets.
		return nil, driver.OpenError(driver.Invalid, err)
	}
	return sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
		if o.Configure != nil {
			o.Configure(so)
		}
	}), nil
}

// OpenTopicURL opens sqsfifo://NAME.fifo?PARAMS.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := driver.NewURLParams(u)
	name, region, endpoint, err := target(u, p)
	if err != nil {
		return nil, err
	}
	var to TopicOptions
	to.DedupWindow = p.Duration("dedup_window", 0, 0, 24*time.Hour)
	declareParams(p) // the consumer's side's, checked here as one URL names the queue for both
	if err := p.Done(); err != nil {
		return nil, err
	}
	c, err := o.newClient(ctx, region, endpoint)
	if err != nil {
		return nil, err
	}
	t, err := openTopic(ctx, c, name, to)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens sqsfifo://NAME.fifo?PARAMS.
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	name, c, so, deadLetters, err := o.subscriptionURL(ctx, u)
	if err != nil {
		return nil, err
	}
	s, err := openSubscription(ctx, c, name, so)
	if err != nil {
		return nil, err
	}
	if deadLetters { // the queue is a dead-letter queue, as OpenDeadLetters opens
		s.defaultReason = RedriveReason
	}
	return broker.NewSubscription(s, nil), nil
}

// OpenDeadLettersURL opens, as OpenDeadLetters does, the dead-letter queue
// of the queue that sqsfifo://NAME.fifo?PARAMS names (the consumer's own
// URL, with the same parameters): the queue its RedrivePolicy's
// deadLetterTargetArn names, read with GetQueueAttributes. wait_time and
// dedup_window apply to it; a queue without a RedrivePolicy is ErrInvalid,
// a missing one ErrNotFound. Messages SQS moved after maxReceiveCount
// receives carry the reason RedriveReason.
func (o *URLOpener) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	name, c, so, _, err := o.subscriptionURL(ctx, u)
	if err != nil {
		return nil, err
	}
	s, err := openDeadLetters(ctx, c, name, so)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

// subscriptionURL reads a subscription URL: the queue, a client for its
// region and endpoint, the options and the dead_letters parameter.
func (o *URLOpener) subscriptionURL(ctx context.Context, u *url.URL) (string, *sqs.Client, SubscriptionOptions, bool, error) {
	var so SubscriptionOptions
	p := driver.NewURLParams(u)
	name, region, endpoint, err := target(u, p)
	if err != nil {
		return "", nil, so, false, err
	}
	so.DedupWindow = p.Duration("dedup_window", 0, 0, 24*time.Hour)
	so.WaitTime = p.Duration("wait_time", 0, 0, 20*time.Second)
	deadLetters := p.Bool("dead_letters", false)
	so.statedMaxReceive, so.statedVisibility = declareParams(p)
	if err := p.Done(); err != nil {
		return "", nil, so, false, err
	}
	c, err := o.newClient(ctx, region, endpoint)
	if err != nil {
		return "", nil, so, false, err
	}
	return name, c, so, deadLetters, nil
}
