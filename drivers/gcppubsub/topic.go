package gcppubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/iterator"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
)

// OrderingMode says when a topic sends Message.Key as the Pub/Sub
// ordering key.
type OrderingMode int

const (
	// OrderingAuto sends the key as the ordering key when a subscription
	// of the topic has message ordering enabled when the topic is opened
	// (ListTopicSubscriptions, GetSubscription), and in the attribute
	// wary-key otherwise. The default.
	OrderingAuto OrderingMode = iota
	// OrderingOn always sends the key as the ordering key.
	OrderingOn
	// OrderingOff never does: the key travels in the attribute wary-key.
	OrderingOff
)

// TopicOptions configures OpenTopic. Nil means defaults.
type TopicOptions struct {
	// TopicOptions are the portable options (publish retries, telemetry).
	broker.TopicOptions
	// Ordering says when Message.Key is sent as the ordering key.
	Ordering OrderingMode

	// owned: the topic closes the client (URL opener).
	owned bool
}

// OpenTopic opens a topic that publishes to the Pub/Sub topic name (a
// bare name in the client's project, or projects/PROJECT/topics/NAME).
// It reads the topic's configuration (GetTopic: a missing topic is
// ErrNotFound) and, under OrderingAuto, its subscriptions'. The client
// is the caller's and is not closed with the topic. ctx bounds those
// requests: the driver sets no timeout of its own.
func OpenTopic(ctx context.Context, client *pubsub.Client, name string, opts *TopicOptions) (*broker.Topic, error) {
	var o TopicOptions
	if opts != nil {
		o = *opts
	}
	o.owned = false
	t, err := openTopic(ctx, client, name, o)
	if err != nil {
		return nil, err
	}
	return broker.NewTopic(t, &o.TopicOptions), nil
}

type topic struct {
	client   *pubsub.Client
	name     string
	proto    *pubsubpb.Topic
	ordering bool
	caps     capability.Topic
	owned    bool
	pool     sync.Pool // of *pubsubpb.PubsubMessage, emptied (SendBatch)
}

func openTopic(ctx context.Context, client *pubsub.Client, name string, o TopicOptions) (*topic, error) {
	if client == nil {
		return nil, driver.OpenError(driver.Invalid, errors.New("gcppubsub: nil *pubsub.Client"))
	}
	full, err := fullName(client.Project(), "topics", name)
	if err != nil {
		return nil, driver.OpenError(driver.Invalid, fmt.Errorf("gcppubsub: %w", err))
	}
	pt, err := client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: full})
	if err != nil {
		return nil, openErr(fmt.Errorf("gcppubsub: topic %s: %w", full, err))
	}
	t := &topic{client: client, name: full, proto: pt, owned: o.owned}
	read := fmt.Sprintf("topic %s's configuration (GetTopic)", shortName(full))
	var src capability.Source
	switch o.Ordering {
	case OrderingOn:
		t.ordering = true
	default:
		ordered, n, err := orderedSubscriptions(ctx, client, full)
		switch {
		case err == nil:
			t.ordering = len(ordered) > 0
			read += fmt.Sprintf(" and its %d subscriptions' (ListTopicSubscriptions, GetSubscription)", n)
			if t.ordering {
				read += ": message ordering on in " + strings.Join(ordered, ", ")
			} else {
				read += ": none orders"
			}
			if o.Ordering == OrderingOff && t.ordering {
				// Keys sent as attributes: those subscriptions deliver
				// in any order, whatever they promise.
				t.ordering = false
				src.Conflicts = append(src.Conflicts, capability.Conflict{
					Setting: capability.SettingOrdering,
					Stated:  "ordering=off (TopicOptions.Ordering OrderingOff): keys sent as the attribute wary-key, not as ordering keys",
					Held:    "message ordering on in " + strings.Join(ordered, ", ") + ", which then delivers this topic's messages in any order",
					Fix:     "drop ordering=off (OrderingAuto), or disable message ordering on those subscriptions",
				})
			}
		case o.Ordering == OrderingOff:
		case classify(err).Code == driver.PermissionDenied:
			// Without the list the driver cannot tell whether a
			// subscription orders: it sends ordering keys, which keep
			// the order where one does.
			t.ordering = true
			src.Unread = append(src.Unread, capability.Unread{
				Setting: capability.SettingOrdering,
				Why:     "listing the topic's subscriptions, to learn whether one orders messages, was denied; keys are sent as ordering keys",
				Fix:     "grant pubsub.topics.listSubscriptions and pubsub.subscriptions.get, or set TopicOptions.Ordering",
			})
		default:
			return nil, openErr(fmt.Errorf("gcppubsub: topic %s: listing its subscriptions: %w", full, err))
		}
	}
	t.caps = topicCapabilities(t.ordering)
	src.Read = read
	t.caps.Source = src
	return t, nil
}

// orderedSubscriptions lists the subscriptions of topic that enable
// message ordering, and how many it has.
func orderedSubscriptions(ctx context.Context, client *pubsub.Client, topic string) ([]string, int, error) {
	it := client.TopicAdminClient.ListTopicSubscriptions(ctx, &pubsubpb.ListTopicSubscriptionsRequest{Topic: topic})
	var ordered []string
	n := 0
	for {
		name, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return ordered, n, nil
		}
		if err != nil {
			return nil, 0, err
		}
		n++
		s, err := client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name})
		if err != nil {
			if classify(err).Code == driver.NotFound { // deleted meanwhile
				continue
			}
			return nil, 0, err
		}
		if s.GetEnableMessageOrdering() {
			ordered = append(ordered, shortName(name))
		}
	}
}

// check checks m against Pub/Sub's limits on attributes and ordering
// keys and returns its size as the portable layer counts it (body, ID,
// key, header names and values; the driver's attribute names fit in
// attrReserve). A message that breaks one is refused with a typed error
// (ErrTooLarge for a limit of size or count, ErrInvalid for a name
// Pub/Sub reserves) before anything is sent.
func check(m *driver.Message, ordering bool) (int, error) {
	size := len(m.Body) + len(m.ID) + len(m.Key)
	for k, v := range m.Headers.All() {
		switch {
		case len(k) >= 4 && strings.EqualFold(k[:4], "goog"):
			return 0, invalidErr(fmt.Errorf("message %q: header %q: Pub/Sub reserves attribute names starting with \"goog\"", m.ID, k))
		case len(k) > MaxAttributeKey:
			return 0, tooLargeErr(fmt.Errorf("message %q: header name %.32q… is %d bytes, over Pub/Sub's attribute name limit of %d", m.ID, k, len(k), MaxAttributeKey))
		case len(v) > MaxAttributeValue:
			return 0, tooLargeErr(fmt.Errorf("message %q: header %q's value is %d bytes, over Pub/Sub's attribute value limit of %d", m.ID, k, len(v), MaxAttributeValue))
		}
		size += len(k) + len(v)
	}
	if len(m.ID) > MaxAttributeValue {
		return 0, tooLargeErr(fmt.Errorf("message ID of %d bytes is over Pub/Sub's attribute value limit of %d", len(m.ID), MaxAttributeValue))
	}
	attrs := len(m.Headers) + 1 // wary-id (the portable layer refuses headers named wary-…)
	if m.Key != "" {
		switch {
		case ordering && len(m.Key) > MaxOrderingKey:
			return 0, tooLargeErr(fmt.Errorf("message %q: key of %d bytes is over Pub/Sub's ordering key limit of %d", m.ID, len(m.Key), MaxOrderingKey))
		case !ordering && len(m.Key) > MaxAttributeValue:
			return 0, tooLargeErr(fmt.Errorf("message %q: key of %d bytes is over Pub/Sub's attribute value limit of %d", m.ID, len(m.Key), MaxAttributeValue))
		case !ordering:
			attrs++ // wary-key
		}
	}
	if attrs > MaxAttributes {
		return 0, tooLargeErr(fmt.Errorf("message %q has %d attributes with the driver's, over Pub/Sub's limit of %d (the driver adds wary-id, and wary-key when the key is not the ordering key)", m.ID, attrs, MaxAttributes))
	}
	if size > MaxPublishBytes-attrReserve {
		return 0, tooLargeErr(fmt.Errorf("message %q is %d bytes with its attributes, over the limit of %d (Pub/Sub's 10 MB less the driver's reserve)", m.ID, size, MaxPublishBytes-attrReserve))
	}
	return size, nil
}

// pooledAttrs bounds the attribute maps the topic keeps for reuse: a
// message with more attributes gets a map of its own, which is dropped.
const pooledAttrs = 16

// encode fills pm, empty but for its Attributes map (which may be nil),
// with m as check passed it.
func encode(pm *pubsubpb.PubsubMessage, m *driver.Message, ordering bool) {
	attrs := pm.Attributes
	if attrs == nil || len(m.Headers)+2 > pooledAttrs {
		attrs = make(map[string]string, len(m.Headers)+2)
	}
	for k, v := range m.Headers.All() {
		attrs[k] = v
	}
	attrs[AttrID] = m.ID
	pm.Data, pm.Attributes = m.Body, attrs
	if m.Key != "" {
		if ordering {
			pm.OrderingKey = m.Key
		} else {
			attrs[AttrKey] = m.Key
		}
	}
}

// SendBatch checks every message first (nothing is sent if one breaks a
// rule), then publishes them with Publish, in requests of at most 1000
// messages and 10 MB. A request is all or nothing; when the requests
// fare differently it returns a *driver.BatchError, with
// driver.ErrNotAttempted for the messages of requests not sent after one
// failed.
//
// The PubsubMessages and their attribute maps are the topic's, reused
// from one call to the next: the generated client has marshalled a
// request when Publish returns and keeps no reference to it, so a
// published message costs no allocation of its own in the driver.
func (t *topic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		size, err := check(m, t.ordering)
		if err != nil {
			errs := make([]error, len(msgs))
			for j := range errs {
				errs[j] = driver.ErrNotAttempted
			}
			errs[i] = err
			return driver.BatchErrors(errs)
		}
		sizes[i] = size + 64 // Pub/Sub's framing of each message
	}
	pms := make([]*pubsubpb.PubsubMessage, len(msgs))
	for i, m := range msgs {
		pm, _ := t.pool.Get().(*pubsubpb.PubsubMessage)
		if pm == nil {
			pm = new(pubsubpb.PubsubMessage)
		}
		encode(pm, m, t.ordering)
		pms[i] = pm
	}
	defer t.release(pms)
	for start := 0; start < len(pms); {
		end, size := start, 0
		for end < len(pms) && end-start < MaxBatchSize && (end == start || size+sizes[end] <= MaxPublishBytes) {
			size += sizes[end]
			end++
		}
		if _, err := t.client.TopicAdminClient.Publish(ctx, &pubsubpb.PublishRequest{Topic: t.name, Messages: pms[start:end]}); err != nil {
			if start == 0 && end == len(pms) {
				return err
			}
			errs := make([]error, len(msgs))
			for i := range errs {
				switch {
				case i >= start && i < end:
					errs[i] = err
				case i >= end:
					errs[i] = driver.ErrNotAttempted
				}
			}
			return driver.BatchErrors(errs)
		}
		start = end
	}
	return nil
}

// release empties the messages of a request that has returned and keeps
// them, with their attribute maps when small, for the next SendBatch.
func (t *topic) release(pms []*pubsubpb.PubsubMessage) {
	for _, pm := range pms {
		attrs := pm.Attributes
		if len(attrs) > pooledAttrs {
			attrs = nil
		}
		clear(attrs)
		*pm = pubsubpb.PubsubMessage{Attributes: attrs}
		t.pool.Put(pm)
	}
}

func (t *topic) Capabilities() capability.Topic      { return t.caps }
func (t *topic) Classify(err error) driver.ErrorInfo { return classify(err) }
func (t *topic) ErrorAs(err error, i any) bool       { return errorAs(err, i) }

// As accepts **pubsub.Client and **pubsubpb.Topic (the configuration
// read when the topic was opened).
func (t *topic) As(i any) bool {
	switch p := i.(type) {
	case **pubsub.Client:
		*p = t.client
		return true
	case **pubsubpb.Topic:
		*p = t.proto
		return true
	}
	return false
}

// Close closes the client only when the URL opener made it.
func (t *topic) Close() error {
	if t.owned {
		return t.client.Close()
	}
	return nil
}
