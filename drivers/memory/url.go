package memory

import (
	"context"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// Scheme is the URL scheme the package registers on broker.DefaultURLMux.
const Scheme = "mem"

func init() {
	o := &URLOpener{}
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens "mem" URLs on a Broker, creating the topic and
// subscription named if they do not exist. The one registered on
// broker.DefaultURLMux uses Default(); register your own on a broker.URLMux
// to open URLs on another Broker.
type URLOpener struct {
	// Broker is the broker opened on (nil: Default()).
	Broker *Broker
	// TopicOptions and SubscriptionOptions are passed to the constructors.
	TopicOptions        *TopicOptions
	SubscriptionOptions *SubscriptionOptions
}

func (o *URLOpener) broker() *Broker {
	if o.Broker != nil {
		return o.Broker
	}
	return Default()
}

// OpenTopicURL opens mem://TOPIC?PARAMS.
func (o *URLOpener) OpenTopicURL(_ context.Context, u *url.URL) (*broker.Topic, error) {
	names, cfg, explicit, given, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if len(names) != 1 {
		return nil, driver.Invalidf("memory: a topic URL names one topic (mem://TOPIC)")
	}
	b := o.broker()
	conflicts, err := b.ensure(names[0], "", cfg, explicit, given)
	if err != nil {
		return nil, err
	}
	return b.openTopic(names[0], o.TopicOptions, conflicts), nil
}

// OpenSubscriptionURL opens mem://TOPIC/SUBSCRIPTION?PARAMS.
func (o *URLOpener) OpenSubscriptionURL(_ context.Context, u *url.URL) (*broker.Subscription, error) {
	names, cfg, explicit, given, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if len(names) != 2 {
		return nil, driver.Invalidf("memory: a subscription URL names a topic and a subscription (mem://TOPIC/SUBSCRIPTION)")
	}
	b := o.broker()
	conflicts, err := b.ensure(names[0], names[1], cfg, explicit, given)
	if err != nil {
		return nil, err
	}
	return b.openSub(names[0], names[1], false, o.SubscriptionOptions, conflicts), nil
}

// OpenDeadLettersURL opens the dead letters of the subscription that
// mem://TOPIC/SUBSCRIPTION?PARAMS names, as Broker.OpenDeadLetters does:
// the URL is the consumer's own, with the same parameters, and the topic
// and subscription are created if they do not exist, as
// OpenSubscriptionURL creates them.
func (o *URLOpener) OpenDeadLettersURL(_ context.Context, u *url.URL) (*broker.Subscription, error) {
	names, cfg, explicit, given, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if len(names) != 2 {
		return nil, driver.Invalidf("memory: the dead letters of a subscription are opened by its URL (mem://TOPIC/SUBSCRIPTION)")
	}
	b := o.broker()
	if _, err := b.ensure(names[0], names[1], cfg, explicit, given); err != nil {
		return nil, err
	}
	return b.OpenDeadLetters(names[0], names[1], o.SubscriptionOptions)
}

// ensure creates the topic (with cfg) and the subscription if missing. An
// existing topic of another profile than an explicit one, or of another
// nackdelay than a given one, is an error; the
// settings that the URL's other parameters (given) state otherwise than
// an existing topic holds are returned as conflicts.
func (b *Broker) ensure(topicName, sub string, cfg TopicConfig, explicitProfile bool, given map[string]bool) ([]capability.Conflict, error) {
	n, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errBrokerClosed
	}
	var conflicts []capability.Conflict
	t, ok := b.topics[topicName]
	switch {
	case !ok:
		t = newTopic(topicName, n)
		b.topics[topicName] = t
	case explicitProfile && t.cfg.Profile != n.Profile:
		return nil, errorf(codeInvalid, "topic %q exists with profile %s, not %s", topicName, t.cfg.Profile, n.Profile)
	case given["nackdelay"] && t.cfg.NoNackDelay != n.NoNackDelay:
		return nil, errorf(codeInvalid, "topic %q exists with nackdelay=%t, not %t", topicName, !t.cfg.NoNackDelay, !n.NoNackDelay)
	default:
		conflicts = urlConflicts(t, given, cfg, explicitProfile)
	}
	if sub != "" {
		if _, ok := t.subs[sub]; !ok {
			t.addSub(b, sub)
		}
	}
	return conflicts, nil
}

// parseURL reads the names (host and path segments) and the parameters.
func parseURL(u *url.URL) (names []string, cfg TopicConfig, explicitProfile bool, given map[string]bool, err error) {
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, cfg, false, nil, driver.Invalidf("memory: the URL has a fragment")
	}
	if u.Host != "" {
		names = append(names, u.Host)
	}
	for _, s := range strings.Split(strings.Trim(u.Path, "/"), "/") {
		if s != "" {
			names = append(names, s)
		}
	}
	p := driver.NewURLParams(u)
	p.NoUserinfo()
	if p.Has("profile") {
		explicitProfile = true
		if cfg.Profile, err = ParseProfile(p.Get("profile")); err != nil {
			// The value is not echoed (see driver.URLParams).
			return nil, cfg, false, nil, driver.Invalidf("memory: URL parameter profile: want queue, partitioned, sqsfifo or servicebus")
		}
	}
	// Negative values mean "none", as in TopicConfig.
	const anyD, anyI = time.Duration(math.MaxInt64), math.MaxInt
	cfg.LockTimeout = p.Duration("lock", 0, -anyD, anyD)
	cfg.DedupWindow = p.Duration("dedup", 0, -anyD, anyD)
	cfg.MessageRetention = p.Duration("retention", 0, -anyD, anyD)
	cfg.DeliveryLimit = p.Int("limit", 0, -anyI, anyI)
	cfg.Partitions = p.Int("partitions", 0, 0, MaxPartitions)
	cfg.MaxMessageSize = p.Int("maxsize", 0, -anyI, anyI)
	cfg.NoNackDelay = !p.Bool("nackdelay", true)
	if err := p.Done(); err != nil {
		return nil, cfg, false, nil, err
	}
	given = map[string]bool{"nackdelay": p.Has("nackdelay")}
	for _, s := range urlSettings {
		given[s.param] = p.Has(s.param)
	}
	return names, cfg, explicitProfile, given, nil
}
