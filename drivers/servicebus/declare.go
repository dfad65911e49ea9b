package servicebus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

// isoText writes d as the administration API wants it (ISO 8601).
func isoText(d time.Duration) *string {
	s := "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
	return &s
}

func ptr[T any](v T) *T { return &v }

// publisherFields are the administration API's fields for the publisher's
// side's properties tp states (nil for those it leaves to the service):
// duplicate detection and its window, the size limit. Queues and topics
// share them.
func publisherFields(tp TopicProperties) (dedup *bool, window *string, sizeKB *int64) {
	if tp.DuplicateDetectionWindow > 0 {
		dedup, window = ptr(true), isoText(tp.DuplicateDetectionWindow)
	}
	if tp.MaxMessageSize > 0 {
		sizeKB = ptr(int64(tp.MaxMessageSize >> 10))
	}
	return dedup, window, sizeKB
}

// consumerFields are the administration API's fields for the consumer's
// side's properties sp states: the lock duration, MaxDeliveryCount, the
// time to live. Queues and subscriptions share them.
func consumerFields(sp SubscriptionProperties) (lock *string, maxDelivery *int32, ttl *string) {
	if sp.LockDuration > 0 {
		lock = isoText(sp.LockDuration)
	}
	if sp.MaxDeliveryCount > 0 {
		maxDelivery = ptr(int32(sp.MaxDeliveryCount))
	}
	if sp.DefaultMessageTimeToLive > 0 && sp.DefaultMessageTimeToLive != capability.HorizonUnbounded {
		ttl = isoText(sp.DefaultMessageTimeToLive)
	}
	return lock, maxDelivery, ttl
}

func createErr(what, name string, err error) error {
	return driver.OpenError(code(err), fmt.Errorf("servicebus: create %s %q: %w", what, name, err))
}

// CreateQueue creates the queue name through adm with the properties
// that are set (zero: the service's defaults): the publisher's side tp
// (duplicate detection, the size limit, sessions) and the consumer's side
// sp (lock duration, MaxDeliveryCount, TTL; sessions from either). Its
// errors match the classes of package broker; an existing entity is not
// changed (the service refuses to create it again).
func CreateQueue(ctx context.Context, adm *admin.Client, name string, tp TopicProperties, sp SubscriptionProperties) error {
	p := &admin.QueueProperties{RequiresSession: ptr(tp.RequiresSession || sp.RequiresSession)}
	p.LockDuration, p.MaxDeliveryCount, p.DefaultMessageTimeToLive = consumerFields(sp)
	p.RequiresDuplicateDetection, p.DuplicateDetectionHistoryTimeWindow, p.MaxMessageSizeInKilobytes = publisherFields(tp)
	if _, err := adm.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: p}); err != nil {
		return createErr("queue", name, err)
	}
	return nil
}

// CreateTopic creates the topic name through adm with the publisher's
// side's properties that are set (duplicate detection, the size limit;
// RequiresSession is its subscriptions'). Errors as CreateQueue's.
func CreateTopic(ctx context.Context, adm *admin.Client, name string, tp TopicProperties) error {
	p := &admin.TopicProperties{}
	p.RequiresDuplicateDetection, p.DuplicateDetectionHistoryTimeWindow, p.MaxMessageSizeInKilobytes = publisherFields(tp)
	if _, err := adm.CreateTopic(ctx, name, &admin.CreateTopicOptions{Properties: p}); err != nil {
		return createErr("topic", name, err)
	}
	return nil
}

// CreateSubscription creates the subscription sub of topic through adm
// with the consumer's side's properties that are set. Errors as
// CreateQueue's.
func CreateSubscription(ctx context.Context, adm *admin.Client, topic, sub string, sp SubscriptionProperties) error {
	p := &admin.SubscriptionProperties{RequiresSession: ptr(sp.RequiresSession)}
	p.LockDuration, p.MaxDeliveryCount, p.DefaultMessageTimeToLive = consumerFields(sp)
	if _, err := adm.CreateSubscription(ctx, topic, sub, &admin.CreateSubscriptionOptions{Properties: p}); err != nil {
		return createErr("subscription", topic+"/Subscriptions/"+sub, err)
	}
	return nil
}

// PlanTopologyURL plans (topology.PlanURL) the entity the URL names:
// servicebus://QUEUE, the queue; servicebus://TOPIC/Subscriptions/SUB,
// the topic and its subscription; with the properties its parameters
// state (the openers' parameters: sessions, dedup_window,
// max_message_size, lock_duration, max_delivery_count, ttl). It reads
// each entity through the administration API (at AdminEndpoint, as the
// openers do; read_entity=false is ErrInvalid here) and reports where an
// existing one holds another value than a parameter states. Apply creates
// the missing ones with CreateQueue, CreateTopic and CreateSubscription
// and changes no existing one.
func (o *URLOpener) PlanTopologyURL(ctx context.Context, u *url.URL) (*topology.Plan, error) {
	p := driver.NewURLParams(u)
	entity, client, ac, v, err := o.clients(u, p)
	if err != nil {
		return nil, err
	}
	_ = client.Close(ctx) // the plan reads and creates through the administration API only
	tp, sp := topicParams(p), subscriptionParams(p)
	p.Int("max_sessions", 0, 1, 1000)
	p.Duration("session_idle", 0, time.Millisecond, time.Hour)
	p.Duration("receive_wait", 0, time.Millisecond, time.Minute)
	p.Duration("settle_timeout", 0, time.Millisecond, 10*time.Minute)
	if err := p.Done(); err != nil {
		return nil, err
	}
	if ac == nil {
		return nil, driver.Invalidf("servicebus: read_entity=false: a topology is read and declared through the administration API")
	}
	path, err := parseEntity(entity)
	if err != nil {
		return nil, err
	}
	if path.dlq {
		return nil, driver.Invalidf("servicebus: %q is a dead-letter queue, which comes with its queue or subscription: plan theirs", entity)
	}
	type item struct {
		e    topology.Entity
		held func(context.Context) (entityProps, error)
		s    func(held entityProps) []setting
	}
	var items []item
	if path.queue != "" {
		items = append(items, item{topology.Entity{Kind: "queue", Name: path.queue},
			func(ctx context.Context) (entityProps, error) { return readQueue(ctx, ac, path.queue) },
			func(h entityProps) []setting {
				s := topicSettings(v, tp.entity(), h, true)
				return append(s, subscriptionSettings(v, sp.entity(), h, false)[:3]...) // sessions is in both
			}})
	} else {
		items = append(items, item{topology.Entity{Kind: "topic", Name: path.topic},
			func(ctx context.Context) (entityProps, error) { return readTopic(ctx, ac, path.topic) },
			func(h entityProps) []setting { return topicSettings(v, tp.entity(), h, false) }},
			item{topology.Entity{Kind: "subscription", Name: path.topic + "/Subscriptions/" + path.sub},
				func(ctx context.Context) (entityProps, error) { return readSubscription(ctx, ac, path.topic, path.sub) },
				func(h entityProps) []setting { return subscriptionSettings(v, sp.entity(), h, false) }})
	}
	var entities []topology.Entity
	for _, it := range items {
		e := it.e
		held, err := it.held(ctx)
		switch {
		case errors.Is(err, errNotFound):
			held = entityProps{}
		case err != nil:
			return nil, openReadError(err, v.adminAt)
		default:
			e.Exists = true
		}
		for _, s := range it.s(held) {
			if !s.stated {
				continue
			}
			e.Settings = append(e.Settings, s.name+" "+s.value)
			prop := s.prop
			if prop == "" {
				prop = s.held
			}
			if e.Exists && s.differ {
				e.Conflicts = append(e.Conflicts, capability.Conflict{Setting: s.setting, Stated: s.param + "=" + s.value, Held: s.name + " " + prop})
			}
		}
		entities = append(entities, e)
	}
	apply := func(ctx context.Context, missing []topology.Entity) error {
		for _, e := range missing {
			var err error
			switch e.Kind {
			case "queue":
				err = CreateQueue(ctx, ac, path.queue, tp, sp)
			case "topic":
				err = CreateTopic(ctx, ac, path.topic, tp)
			case "subscription":
				err = CreateSubscription(ctx, ac, path.topic, path.sub, sp)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return topology.NewPlan(entities, apply), nil
}
