package kafka

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// Scheme is the URL scheme this package registers on broker.DefaultURLMux.
const Scheme = "kafka"

func init() {
	o := new(URLOpener)
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens kafka:// URLs (see the package doc for their form). It
// is the one place the driver builds clients: one per topic or
// subscription it opens, closed with it.
type URLOpener struct {
	// ClientOpts are added to every client the opener creates, after the
	// driver's (TopicOpts, SubscriptionOpts) and before the seed brokers
	// (TLS, SASL, ...).
	ClientOpts []kgo.Opt
}

// urlName is the one name a kafka:// URL carries: its host, the topic (for
// a topic) or the group (for a subscription). A path (kafka://a/b once
// opened topic "ab"), a fragment or userinfo (credentials go in
// URLOpener.ClientOpts) is ErrInvalid.
func urlName(u *url.URL, p *driver.URLParams, what string) (string, error) {
	p.NoUserinfo()
	switch {
	case u.Opaque != "" || u.Host == "":
		return "", driver.Invalidf("kafka: the URL names no %s (kafka://%s?...)", what, strings.ToUpper(what))
	case u.Path != "" && u.Path != "/", u.RawPath != "":
		return "", driver.Invalidf("kafka: the URL has a path: it names one %s, as its host (kafka://%s?...)", what, strings.ToUpper(what))
	case u.Fragment != "" || u.RawFragment != "":
		return "", driver.Invalidf("kafka: the URL has a fragment")
	}
	return u.Host, nil
}

func brokersParam(p *driver.URLParams) ([]string, error) {
	v := p.Get("brokers")
	if v == "" {
		v = os.Getenv("KAFKA_BROKERS")
	}
	if v == "" {
		return nil, driver.Invalidf("kafka: no brokers: set the URL parameter brokers or the environment variable KAFKA_BROKERS")
	}
	seeds := strings.Split(v, ",")
	if kgo.ValidateOpts(kgo.SeedBrokers(seeds...)) != nil {
		// kgo's error quotes the address: the value is not echoed.
		return nil, driver.Invalidf("kafka: the brokers (URL parameter brokers or KAFKA_BROKERS) are not a list of HOST:PORT")
	}
	return seeds, nil
}

// OpenTopicURL opens kafka://TOPIC?brokers=HOST:PORT,...&skip_check=BOOL.
// The topic owns its client and closes it on Close.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := driver.NewURLParams(u)
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
	cl, err := o.newClient(TopicOpts(), seeds)
	if err != nil {
		return nil, err
	}
	t, err := openTopic(ctx, cl, name, &to)
	if err != nil {
		cl.Close()
		return nil, err
	}
	t.owned = true
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens
// kafka://GROUP?topic=TOPIC&brokers=HOST:PORT,...&ordered=BOOL&dead_letter_topic=T&dead_letters=BOOL&delivery_limit=N&retry_topic=T&commit_interval=DURATION&skip_check=BOOL
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	group, seeds, topic, so, dl, err := subscriptionURL(u)
	if err != nil {
		return nil, err
	}
	s, err := o.openSubscription(ctx, seeds, topic, group, &so, dl)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

// DeadLetterGroupSuffix makes the consumer group that
// OpenDeadLettersURL reads a dead-letter topic with: the subscription's
// group followed by ".dead-letters".
const DeadLetterGroupSuffix = ".dead-letters"

// OpenDeadLettersURL opens the dead-letter topic of the subscription that
// kafka://GROUP?topic=TOPIC&dead_letter_topic=DLT&... names (the
// consumer's own URL, with the same parameters): a subscription of the
// group GROUP+DeadLetterGroupSuffix on DLT, as OpenDeadLetters opens it,
// so that each dead letter reports its reason and origin. The same brokers, ClientOpts and skip_check apply;
// the consumer's other options (ordered, delivery_limit, retry_topic,
// commit_interval) are checked but do not apply. Acks commit the group's
// offsets, cumulatively as on any Kafka subscription. Every subscription
// dead-lettering to DLT writes to the same topic, so the reader sees the
// dead letters of each (HeaderDeadLetterSource tells where a record came
// from). A URL without dead_letter_topic is ErrInvalid: that subscription
// dead-letters nothing.
func (o *URLOpener) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	group, seeds, _, so, _, err := subscriptionURL(u)
	if err != nil {
		return nil, err
	}
	if so.DeadLetterTopic == "" {
		return nil, driver.Invalidf("kafka: the subscription of group %q has no dead_letter_topic in its URL, hence no dead letters", group)
	}
	dso := SubscriptionOptions{SkipCheck: so.SkipCheck}
	s, err := o.openSubscription(ctx, seeds, so.DeadLetterTopic, group+DeadLetterGroupSuffix, &dso, true)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

// subscriptionURL reads a subscription URL: the group, the seed brokers,
// the topic, the options, and whether the topic is read as dead letters
// (dead_letters, OpenDeadLetters).
func subscriptionURL(u *url.URL) (group string, seeds []string, topic string, so SubscriptionOptions, deadLetters bool, err error) {
	p := driver.NewURLParams(u)
	if group, err = urlName(u, p, "group"); err != nil {
		return "", nil, "", so, false, err
	}
	if seeds, err = brokersParam(p); err != nil {
		return "", nil, "", so, false, err
	}
	topic = p.Get("topic")
	if topic == "" {
		return "", nil, "", so, false, driver.Invalidf("kafka: the URL parameter topic is required")
	}
	so = SubscriptionOptions{
		Ordered:         p.Bool("ordered", false),
		DeadLetterTopic: p.Get("dead_letter_topic"),
		RetryTopic:      p.Get("retry_topic"),
		DeliveryLimit:   p.Int("delivery_limit", 0, 0, math.MaxInt32),
		CommitInterval:  p.Duration("commit_interval", 0, 0, time.Hour),
		SkipCheck:       p.Bool("skip_check", false),
	}
	deadLetters = p.Bool("dead_letters", false)
	if err := p.Done(); err != nil {
		return "", nil, "", so, false, err
	}
	return group, seeds, topic, so, deadLetters, nil
}

// newClient builds a client from the driver's options, the opener's and
// the seed brokers; an option kgo rejects is ErrInvalid.
func (o *URLOpener) newClient(driverOpts []kgo.Opt, seeds []string) (*kgo.Client, error) {
	all := append(append(driverOpts, o.ClientOpts...), kgo.SeedBrokers(seeds...))
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("kafka: %w", err))
	}
	return cl, nil
}

// openSubscription opens a subscription of group on topic (its dead
// letters, as OpenDeadLetters, with deadLetters), on a client of its own
// that it closes.
func (o *URLOpener) openSubscription(ctx context.Context, seeds []string, topic, group string, so *SubscriptionOptions, deadLetters bool) (*subscription, error) {
	cl, err := o.newClient(SubscriptionOpts(group), seeds)
	if err != nil {
		return nil, err
	}
	s, err := newSubscription(ctx, cl, topic, group, so, deadLetters)
	if err != nil {
		cl.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}
