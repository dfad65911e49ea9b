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

// urlName is the one name a kafka:// URL carries: its host, the topic (for
// a topic) or the group (for a subscription). A path (kafka://a/b once
// opened topic "ab"), a fragment or userinfo (credentials go in
// URLOpener.ClientOpts) is ErrInvalid.
func urlName(u *url.URL, p *broker.URLParams, what string) (string, error) {
	p.NoUserinfo()
	switch {
	case u.Opaque != "" || u.Host == "":
		return "", broker.Invalidf("kafka: the URL names no %s (kafka://%s?...)", what, strings.ToUpper(what))
	case u.Path != "" && u.Path != "/", u.RawPath != "":
		return "", broker.Invalidf("kafka: the URL has a path: it names one %s, as its host (kafka://%s?...)", what, strings.ToUpper(what))
	case u.Fragment != "" || u.RawFragment != "":
		return "", broker.Invalidf("kafka: the URL has a fragment")
	}
	return u.Host, nil
}

func brokersParam(p *broker.URLParams) ([]string, error) {
	v := p.Get("brokers")
	if v == "" {
		v = os.Getenv("KAFKA_BROKERS")
	}
	if v == "" {
		return nil, broker.Invalidf("kafka: no brokers: set the URL parameter brokers or the environment variable KAFKA_BROKERS")
	}
	seeds := strings.Split(v, ",")
	if kgo.ValidateOpts(kgo.SeedBrokers(seeds...)) != nil {
		// kgo's error quotes the address: the value is not echoed.
		return nil, broker.Invalidf("kafka: the brokers (URL parameter brokers or KAFKA_BROKERS) are not a list of HOST:PORT")
	}
	return seeds, nil
}

// OpenTopicURL opens kafka://TOPIC?brokers=HOST:PORT,...&skip_check=BOOL.
// The topic owns its client and closes it on Close.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := broker.NewURLParams(u)
	name, err := urlName(u, p, "topic")
	if err != nil {
		return nil, err
	}
	seeds, err := brokersParam(p)
	if err != nil {
		return nil, err
	}
	to := TopicOptions{SkipCheck: p.Bool("skip_check", false)}
	if err := p.Done(); err != nil {
		return nil, err
	}
	t, err := openTopic(ctx, o.clientOpts(seeds), name, &to)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens
// kafka://GROUP?topic=TOPIC&brokers=HOST:PORT,...&ordered=BOOL&dead_letter_topic=T&dead_letters=BOOL&delivery_limit=N&retry_topic=T&commit_interval=DURATION&skip_check=BOOL
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	p := broker.NewURLParams(u)
	group, err := urlName(u, p, "group")
	if err != nil {
		return nil, err
	}
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
		DeadLetters:     p.Bool("dead_letters", false),
		RetryTopic:      p.Get("retry_topic"),
		DeliveryLimit:   p.Int("delivery_limit", 0, 0, math.MaxInt32),
		CommitInterval:  p.Duration("commit_interval", 0, 0, time.Hour),
		SkipCheck:       p.Bool("skip_check", false),
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	s, err := newSubscription(ctx, o.clientOpts(seeds), topic, group, &so)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

// clientOpts are the opener's options followed by the seed brokers.
func (o *URLOpener) clientOpts(seeds []string) []kgo.Opt {
	return append(append([]kgo.Opt{}, o.ClientOpts...), kgo.SeedBrokers(seeds...))
}
