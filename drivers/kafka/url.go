package kafka

import (
	"context"
	"net/url"
	"os"
	"strconv"
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

// OpenTopicURL opens kafka://TOPIC?brokers=HOST:PORT,... The topic owns
// its client and closes it on Close.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := broker.NewURLParams(u)
	seeds, err := brokersParam(p)
	if err != nil {
		return nil, err
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	name := u.Host + strings.TrimPrefix(u.Path, "/")
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, o.ClientOpts...), kgo.SeedBrokers(seeds...))...)
	if err != nil {
		return nil, broker.Invalidf("kafka: %v", err)
	}
	t, err := newTopic(ctx, cl, name, false, true, nil)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens
// kafka://GROUP?topic=TOPIC&brokers=HOST:PORT,...&ordered=true&dead_letter_topic=T&delivery_limit=N&retry_topic=T&commit_interval=DURATION
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
	var so SubscriptionOptions
	if v := p.Get("ordered"); v != "" {
		if so.Ordered, err = strconv.ParseBool(v); err != nil {
			return nil, broker.Invalidf("kafka: ordered=%q is not a boolean", v)
		}
	}
	so.DeadLetterTopic = p.Get("dead_letter_topic")
	so.RetryTopic = p.Get("retry_topic")
	if v := p.Get("delivery_limit"); v != "" {
		if so.DeliveryLimit, err = strconv.Atoi(v); err != nil {
			return nil, broker.Invalidf("kafka: delivery_limit=%q is not a number", v)
		}
	}
	if v := p.Get("commit_interval"); v != "" {
		if so.CommitInterval, err = time.ParseDuration(v); err != nil {
			return nil, broker.Invalidf("kafka: commit_interval=%q is not a duration", v)
		}
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	group := u.Host + strings.TrimPrefix(u.Path, "/")
	opts := append(append([]kgo.Opt{}, o.ClientOpts...), kgo.SeedBrokers(seeds...))
	s, err := newSubscription(ctx, opts, group, topic, &so)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}
