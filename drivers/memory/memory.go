package memory

import (
	"slices"
	"sync"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

// Broker is an in-memory broker: a namespace of topics and their
// subscriptions. It is safe for concurrent use and runs no goroutines of its
// own: time-based events (lock expiry, nack delays) are applied when a
// consumer receives or settles, and receivers waiting for them wake through
// the Clock.
type Broker struct {
	clock Clock

	mu     sync.Mutex
	topics map[string]*topic
	closed bool
	done   chan struct{} // closed by Close
	tokens uint64        // last delivery token handed out
}

// Options configures a Broker. Nil means defaults.
type Options struct {
	// Clock is the time source (default: the real clock). Tests pass a
	// *FakeClock.
	Clock Clock
}

// New returns an empty Broker.
func New(opts *Options) *Broker {
	b := &Broker{clock: realClock{}, topics: map[string]*topic{}, done: make(chan struct{})}
	if opts != nil && opts.Clock != nil {
		b.clock = opts.Clock
	}
	return b
}

var (
	defaultOnce   sync.Once
	defaultBroker *Broker
)

// Default returns the process-wide Broker (on the real clock) that the
// "mem" URL scheme uses.
func Default() *Broker {
	defaultOnce.Do(func() { defaultBroker = New(nil) })
	return defaultBroker
}

// Clock returns the broker's clock.
func (b *Broker) Clock() Clock { return b.clock }

// CreateTopic creates a topic. cfg nil means the zero TopicConfig (a Queue
// topic with defaults). It returns an error matching broker.ErrInvalid if
// the topic exists or cfg is invalid.
func (b *Broker) CreateTopic(name string, cfg *TopicConfig) error {
	var c TopicConfig
	if cfg != nil {
		c = *cfg
	}
	n, err := c.normalize()
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errBrokerClosed
	}
	if _, ok := b.topics[name]; ok {
		return errorf(codeInvalid, "topic %q already exists", name)
	}
	b.topics[name] = newTopic(name, n)
	return nil
}

// CreateSubscription creates a subscription of a topic. It receives every
// message published to the topic from now on (fan-out: every subscription
// gets its own copy). It returns an error matching broker.ErrNotFound if the
// topic does not exist, and broker.ErrInvalid if the subscription exists.
func (b *Broker) CreateSubscription(topicName, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errBrokerClosed
	}
	t, ok := b.topics[topicName]
	if !ok {
		return errorf(codeNotFound, "topic %q does not exist", topicName)
	}
	if _, ok := t.subs[name]; ok {
		return errorf(codeInvalid, "subscription %q of topic %q already exists", name, topicName)
	}
	t.addSub(b, name)
	return nil
}

// TopicConfig returns the configuration of a topic with its defaults
// filled in, and whether the topic exists. A setting that is none (no lock
// expiry, no delivery limit, no dedup window, no size limit) is negative,
// as in the TopicConfig given to CreateTopic, so that the result creates
// an identical topic and its Capabilities are the topic's.
func (b *Broker) TopicConfig(name string) (TopicConfig, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[name]
	if !ok {
		return TopicConfig{}, false
	}
	return t.cfg.external(), true
}

// TopicOptions configures a topic handle. Nil means defaults. A topic's
// behaviour is configured on the broker side, per topic (TopicConfig);
// these are the handle's options.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, logger).
	broker.TopicOptions
}

// SubscriptionOptions configures a subscription handle. Nil means
// defaults. As for topics, the subscription's behaviour comes from its
// topic's TopicConfig.
type SubscriptionOptions struct {
	// SubscriptionOptions are the portable options (logger).
	broker.SubscriptionOptions
}

// OpenTopic opens a publisher on a topic. The topic is looked up now: if it
// does not exist, the Topic is returned anyway and every Publish fails with
// an error matching broker.ErrNotFound (also after the topic is created).
// opts nil means defaults.
func (b *Broker) OpenTopic(name string, opts *TopicOptions) (*broker.Topic, error) {
	return b.openTopic(name, opts, nil), nil
}

// openTopic is OpenTopic; the topic's capabilities carry conflicts (those
// of the URL it was opened by).
func (b *Broker) openTopic(name string, opts *TopicOptions, conflicts []capability.Conflict) *broker.Topic {
	b.mu.Lock()
	t := b.topics[name]
	b.mu.Unlock()
	var po *broker.TopicOptions
	if opts != nil {
		po = &opts.TopicOptions
	}
	return broker.NewTopic(&topicDriver{b: b, name: name, t: t, conflicts: conflicts}, po)
}

// OpenSubscription opens one more competing consumer on a subscription. If
// the topic or subscription does not exist now, the Subscription is
// returned anyway and every Receive fails with an error matching
// broker.ErrNotFound.
// On a Partitioned topic, opening a consumer reassigns the partitions.
func (b *Broker) OpenSubscription(topicName, name string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	return b.openSub(topicName, name, false, opts, nil), nil
}

// OpenDeadLetters opens a consumer on the dead-letter queue of a
// subscription: a plain queue (no order, per-message ack, no delivery
// limit) whose messages carry the header driver.HeaderDeadLetterReason.
func (b *Broker) OpenDeadLetters(topicName, name string, opts *SubscriptionOptions) (*broker.Subscription, error) {
	return b.openSub(topicName, name, true, opts, nil), nil
}

// openSub opens a consumer of the subscription, or of its dead letters;
// its capabilities carry conflicts (those of the URL it was opened by).
func (b *Broker) openSub(topicName, name string, dead bool, opts *SubscriptionOptions, conflicts []capability.Conflict) *broker.Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &subDriver{b: b, desc: topicName + "/" + name}
	if dead {
		s.desc += " (dead letters)"
	}
	if t, ok := b.topics[topicName]; ok {
		if q, ok := t.subs[name]; ok {
			if dead {
				q = q.dlq
			}
			s.q = q
			s.caps = q.caps
			if !b.closed {
				s.h = q.open(b.clock.Now())
			}
		}
	}
	if s.q == nil {
		s.caps = TopicConfig{}.SubscriptionCapabilities()
		s.caps.Source = missingSource("subscription "+s.desc, capability.SettingDeliveryLimit, capability.SettingDeadLetter,
			capability.SettingOrdering, capability.SettingLockTimeout, capability.SettingRedeliveryHorizon)
	}
	s.caps.Source.Conflicts = slices.Concat(s.caps.Source.Conflicts, conflicts)
	var po *broker.SubscriptionOptions
	if opts != nil {
		po = &opts.SubscriptionOptions
	}
	return broker.NewSubscription(s, po)
}

// Close closes the broker: every later call on it, and on topics and
// subscriptions opened from it, fails with an error matching
// broker.ErrClosed, and waiting receivers return.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	close(b.done)
	return nil
}
