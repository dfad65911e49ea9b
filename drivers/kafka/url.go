package kafka

import (
	"context"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
)

// Scheme is the URL scheme this package registers on broker.DefaultURLMux.
const Scheme = "kafka"

func init() {
	o := new(URLOpener)
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens kafka:// URLs (see the package doc for their form).
type URLOpener struct {
	// ClientOpts are added to every client the opener creates, before the
	// seed brokers (TLS, SASL, ...).
	ClientOpts []kgo.Opt
}

func brokersParam(p *broker.URLParams) ([]string, error) {
	v := p.Get("brokers")
	if v == "" {
		v = os.Getenv("KAFKA_BROKERS")
	}
	if v == "" {
		return nil, broker.Invalidf("kafka: no brokers: set the URL parameter brokers or the environment variable KAFKA_BROKERS")
	}
	return strings.Split(v, ","), nil
}

// OpenTopicURL opens kafka://TOPIC?brokers=HOST:PORT,...&skip_check=BOOL.
// The topic owns its client and closes it on Close.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := broker.NewURLParams(u)
	seeds, err := brokersParam(p)
	if err != nil {
		return nil, err
	}
	to := TopicOptions{SkipCheck: p.Bool("skip_check", false)}
	if err := p.Done(); err != nil {
		return nil, err
	}
	t, err := openTopic(ctx, o.clientOpts(seeds), u.Host+strings.TrimPrefix(u.Path, "/"), &to)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens
// kafka://GROUP?topic=TOPIC&brokers=HOST:PORT,...&ordered=BOOL&dead_letter_topic=T&delivery_limit=N&retry_topic=T&commit_interval=DURATION&skip_check=BOOL
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	p := broker.NewURLParams(u)
	seeds, err := brokersParam(p)
	if err != nil {
		return nil, err
	}
	topic := p.Get("topic")
	if topic == "" {
		return nil, broker.Invalidf("kafka: the URL parameter topic is required")
	}
	so := SubscriptionOptions{
		Ordered:         p.Bool("ordered", false),
		DeadLetterTopic: p.Get("dead_letter_topic"),
		RetryTopic:      p.Get("retry_topic"),
		DeliveryLimit:   p.Int("delivery_limit", 0, 0, math.MaxInt32),
		CommitInterval:  p.Duration("commit_interval", 0, 0, time.Hour),
		SkipCheck:       p.Bool("skip_check", false),
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	s, err := newSubscription(ctx, o.clientOpts(seeds), topic, u.Host+strings.TrimPrefix(u.Path, "/"), &so)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

// clientOpts are the opener's options followed by the seed brokers.
func (o *URLOpener) clientOpts(seeds []string) []kgo.Opt {
	return append(append([]kgo.Opt{}, o.ClientOpts...), kgo.SeedBrokers(seeds...))
}
