package gcppubsub

import (
	"context"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Scheme is the URL scheme the package registers on broker.DefaultURLMux:
// gcppubsub://projects/PROJECT/topics/TOPIC and
// gcppubsub://projects/PROJECT/subscriptions/SUBSCRIPTION.
const Scheme = "gcppubsub"

func init() {
	o := &URLOpener{}
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens gcppubsub:// URLs. Each topic or subscription it opens
// builds its own *pubsub.Client for the URL's project, with the SDK's
// Application Default Credentials (or, when PUBSUB_EMULATOR_HOST is set,
// the emulator at that address, without credentials, as the SDK does),
// and closes it with the topic or subscription. Credentials never appear
// in URLs, errors or logs.
//
// Parameters: for topics, ordering (auto, on or off: TopicOptions.Ordering);
// for subscriptions, wait_time (a duration, SubscriptionOptions.WaitTime),
// dead_letters (a boolean: the subscription reads a dead-letter topic;
// messages without a reason report RedriveReason) and
// dead_letter_subscription (the dead-letter topic's subscription that
// broker.OpenDeadLetters reads). topic, ordering, exactly_once,
// ack_deadline and max_delivery_attempts state how the subscription is
// declared (PlanTopologyURL); an opened subscription compares them with
// its configuration and reports a difference as a Conflict in its
// capabilities' Source (the configuration applies). Any other parameter,
// and a malformed value, is an error matching broker.ErrInvalid that does
// not repeat the value.
type URLOpener struct {
	// ClientOptions, if not nil, are given to every client the opener
	// builds (an endpoint, a gRPC connection, credentials).
	ClientOptions []option.ClientOption
}

// target reads projects/PROJECT/KIND/NAME from u.
func target(u *url.URL, p *driver.URLParams, kind string) (project, full string, err error) {
	p.NoUserinfo()
	path := u.Host + strings.TrimSuffix(u.Path, "/")
	if u.Opaque != "" {
		path = u.Opaque
	}
	parts := strings.Split(path, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[3] == "" || (parts[2] != "topics" && parts[2] != "subscriptions") {
		return "", "", driver.Invalidf("gcppubsub: the URL names no topic or subscription (gcppubsub://projects/PROJECT/topics/TOPIC or …/subscriptions/SUBSCRIPTION)")
	}
	if parts[2] != kind {
		return "", "", driver.Invalidf("gcppubsub: the URL names %s, where %s are opened", parts[2], kind)
	}
	return parts[1], path, nil
}

func (o *URLOpener) newClient(ctx context.Context, project string) (*pubsub.Client, error) {
	c, err := pubsub.NewClient(ctx, project, o.ClientOptions...)
	if err != nil {
		// The SDK's errors name credential files, not secrets.
		return nil, driver.OpenError(driver.Invalid, err)
	}
	return c, nil
}

// OpenTopicURL opens gcppubsub://projects/P/topics/T?PARAMS.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := driver.NewURLParams(u)
	project, full, err := target(u, p, "topics")
	if err != nil {
		return nil, err
	}
	var to TopicOptions
	switch p.Get("ordering") {
	case "", "auto":
	case "on":
		to.Ordering = OrderingOn
	case "off":
		to.Ordering = OrderingOff
	default:
		return nil, driver.Invalidf("gcppubsub: URL parameter ordering is not auto, on or off")
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	c, err := o.newClient(ctx, project)
	if err != nil {
		return nil, err
	}
	to.owned = true
	t, err := openTopic(ctx, c, full, to)
	if err != nil {
		c.Close()
		return nil, err
	}
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens gcppubsub://projects/P/subscriptions/S?PARAMS.
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	c, full, so, deadLetters, err := o.subscriptionURL(ctx, u)
	if err != nil {
		return nil, err
	}
	s, err := openSubscription(ctx, c, full, so)
	if err != nil {
		c.Close()
		return nil, err
	}
	if deadLetters {
		s.defaultReason = RedriveReason
	}
	return broker.NewSubscription(s, nil), nil
}

// OpenDeadLettersURL opens, as OpenDeadLetters does, the dead letters of
// the subscription gcppubsub://projects/P/subscriptions/S?PARAMS names:
// the subscription of its dead-letter topic (dead_letter_subscription, or
// the only one).
func (o *URLOpener) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	c, full, so, _, err := o.subscriptionURL(ctx, u)
	if err != nil {
		return nil, err
	}
	s, err := openDeadLetters(ctx, c, full, so)
	if err != nil {
		c.Close()
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

func (o *URLOpener) subscriptionURL(ctx context.Context, u *url.URL) (*pubsub.Client, string, SubscriptionOptions, bool, error) {
	var so SubscriptionOptions
	p := driver.NewURLParams(u)
	project, full, err := target(u, p, "subscriptions")
	if err != nil {
		return nil, "", so, false, err
	}
	so.WaitTime = p.Duration("wait_time", 0, 0, time.Minute)
	so.DeadLetterSubscription = p.Get("dead_letter_subscription")
	deadLetters := p.Bool("dead_letters", false)
	so.stated = declareParams(p)
	if err := p.Done(); err != nil {
		return nil, "", so, false, err
	}
	c, err := o.newClient(ctx, project)
	if err != nil {
		return nil, "", so, false, err
	}
	so.owned = true
	return c, full, so, deadLetters, nil
}
