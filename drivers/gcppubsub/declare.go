package gcppubsub

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

// stated is what a subscription URL states of the subscription (for
// PlanTopologyURL to declare it): the zero value states nothing. An
// opened subscription compares it with its configuration and reports a
// difference as a Conflict in its capabilities' Source (the
// configuration applies).
type stated struct {
	topic                 string // bare name or full
	ordering, exactlyOnce *bool
	ackDeadline           time.Duration
	maxDeliveryAttempts   int
}

// declareParams reads the parameters that state how the subscription is
// declared: topic, ordering, exactly_once, ack_deadline,
// max_delivery_attempts.
func declareParams(p *driver.URLParams) stated {
	var s stated
	s.topic = p.Get("topic")
	if p.Has("ordering") {
		b := p.Bool("ordering", false)
		s.ordering = &b
	}
	if p.Has("exactly_once") {
		b := p.Bool("exactly_once", false)
		s.exactlyOnce = &b
	}
	s.ackDeadline = p.Duration("ack_deadline", 0, 10*time.Second, MaxAckDeadline)
	s.maxDeliveryAttempts = p.Int("max_delivery_attempts", 0, 5, 100)
	return s
}

// conflicts compares what the URL states with the configuration read.
func (s stated) conflicts(c Config) []capability.Conflict {
	var cs []capability.Conflict
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	fix := func(param, setting string) string {
		return "drop " + param + " from the URL, or change the subscription's " + setting + " (recreate it where Pub/Sub cannot change it)"
	}
	if s.ordering != nil && *s.ordering != c.Ordering {
		cs = append(cs, capability.Conflict{Setting: capability.SettingOrdering, Stated: "ordering=" + strconv.FormatBool(*s.ordering) + " in the URL",
			Held: "message ordering " + onOff(c.Ordering), Fix: fix("ordering", "message ordering")})
	}
	if s.exactlyOnce != nil && *s.exactlyOnce != c.ExactlyOnce {
		cs = append(cs, capability.Conflict{Setting: capability.SettingKind, Stated: "exactly_once=" + strconv.FormatBool(*s.exactlyOnce) + " in the URL",
			Held: "exactly-once delivery " + onOff(c.ExactlyOnce), Fix: fix("exactly_once", "exactly-once delivery")})
	}
	if s.ackDeadline > 0 && s.ackDeadline.Truncate(time.Second) != c.AckDeadline {
		cs = append(cs, capability.Conflict{Setting: capability.SettingLockTimeout, Stated: "ack_deadline=" + s.ackDeadline.String() + " in the URL",
			Held: "ack deadline " + c.AckDeadline.String(), Fix: fix("ack_deadline", "ack deadline")})
	}
	if s.maxDeliveryAttempts > 0 && s.maxDeliveryAttempts != c.MaxDeliveryAttempts {
		held := "no dead-letter policy"
		if c.DeadLetterTopic != "" {
			held = fmt.Sprintf("dead-letter policy after %d delivery attempts", c.MaxDeliveryAttempts)
		}
		cs = append(cs, capability.Conflict{Setting: capability.SettingDeliveryLimit, Stated: fmt.Sprintf("max_delivery_attempts=%d in the URL", s.maxDeliveryAttempts),
			Held: held, Fix: fix("max_delivery_attempts", "dead-letter policy")})
	}
	return cs
}

// DeadLetterName is the name PlanTopologyURL gives the dead-letter topic
// of subscription name, and that topic's subscription: "billing" has
// "billing-dead".
func DeadLetterName(name string) string { return name + "-dead" }

// PlanTopologyURL plans (topology.PlanURL) what
// gcppubsub://projects/P/subscriptions/S?PARAMS states: the topic
// (topic=T, required), with max_delivery_attempts=N the dead-letter topic
// S-dead and its subscription S-dead, and the pull subscription S with
// ordering, exactly_once, ack_deadline and its dead-letter policy. An
// existing subscription's configuration is read (GetSubscription) and
// compared with the URL's; Apply creates what is missing and changes
// nothing that exists.
func (o *URLOpener) PlanTopologyURL(ctx context.Context, u *url.URL) (*topology.Plan, error) {
	p := driver.NewURLParams(u)
	project, full, err := target(u, p, "subscriptions")
	if err != nil {
		return nil, err
	}
	p.Duration("wait_time", 0, 0, time.Minute)
	p.Bool("dead_letters", false)
	p.Get("dead_letter_subscription")
	st := declareParams(p)
	if err := p.Done(); err != nil {
		return nil, err
	}
	if st.topic == "" {
		return nil, driver.Invalidf("gcppubsub: a topology needs the subscription's topic (topic=NAME in the URL)")
	}
	topic, err := fullName(project, "topics", st.topic)
	if err != nil {
		return nil, driver.Invalidf("gcppubsub: URL parameter topic is not a topic name")
	}
	c, err := o.newClient(ctx, project)
	if err != nil {
		return nil, err
	}
	plan, err := planTopology(ctx, c, topic, full, st)
	if err != nil {
		c.Close()
		return nil, err
	}
	return plan, nil
}

func planTopology(ctx context.Context, c *pubsub.Client, topic, sub string, st stated) (*topology.Plan, error) {
	exists := func(err error) (bool, error) {
		switch {
		case err == nil:
			return true, nil
		case classify(err).Code == driver.NotFound:
			return false, nil
		}
		return false, openErr(err)
	}
	topicExists := func(name string) (bool, error) {
		_, err := c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: name})
		return exists(err)
	}
	var entities []topology.Entity
	t := topology.Entity{Kind: "topic", Name: topic}
	var err error
	if t.Exists, err = topicExists(topic); err != nil {
		return nil, err
	}
	entities = append(entities, t)
	deadTopic := "projects/" + projectOf(sub) + "/topics/" + DeadLetterName(shortName(sub))
	deadSub := "projects/" + projectOf(sub) + "/subscriptions/" + DeadLetterName(shortName(sub))
	if st.maxDeliveryAttempts > 0 {
		dt := topology.Entity{Kind: "dead-letter topic", Name: deadTopic}
		if dt.Exists, err = topicExists(deadTopic); err != nil {
			return nil, err
		}
		ds := topology.Entity{Kind: "subscription", Name: deadSub, Settings: []string{"of " + shortName(deadTopic)}}
		_, gerr := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: deadSub})
		if ds.Exists, err = exists(gerr); err != nil {
			return nil, err
		}
		entities = append(entities, dt, ds)
	}
	want := &pubsubpb.Subscription{Name: sub, Topic: topic}
	s := topology.Entity{Kind: "subscription", Name: sub, Settings: []string{"of " + shortName(topic)}}
	if st.ordering != nil {
		want.EnableMessageOrdering = *st.ordering
		s.Settings = append(s.Settings, "message ordering "+strconv.FormatBool(*st.ordering))
	}
	if st.exactlyOnce != nil {
		want.EnableExactlyOnceDelivery = *st.exactlyOnce
		s.Settings = append(s.Settings, "exactly-once delivery "+strconv.FormatBool(*st.exactlyOnce))
	}
	if st.ackDeadline > 0 {
		want.AckDeadlineSeconds = int32(st.ackDeadline / time.Second)
		s.Settings = append(s.Settings, "ack deadline "+st.ackDeadline.Truncate(time.Second).String())
	}
	if st.maxDeliveryAttempts > 0 {
		want.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: deadTopic, MaxDeliveryAttempts: int32(st.maxDeliveryAttempts)}
		s.Settings = append(s.Settings, fmt.Sprintf("dead-letter policy after %d delivery attempts to %s", st.maxDeliveryAttempts, shortName(deadTopic)))
	}
	ps, gerr := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: sub})
	if s.Exists, err = exists(gerr); err != nil {
		return nil, err
	}
	if s.Exists {
		cfg := configOf(ps)
		for _, cf := range st.conflicts(cfg) {
			cf.Fix = ""
			s.Conflicts = append(s.Conflicts, cf)
		}
		if cfg.Topic != topic {
			s.Conflicts = append(s.Conflicts, capability.Conflict{Setting: capability.SettingKind, Stated: "topic " + shortName(topic), Held: "subscription of " + cfg.Topic})
		}
		if st.maxDeliveryAttempts > 0 && cfg.DeadLetterTopic != "" && cfg.DeadLetterTopic != deadTopic {
			s.Conflicts = append(s.Conflicts, capability.Conflict{Setting: capability.SettingDeadLetter, Stated: shortName(deadTopic), Held: "dead-letter topic " + cfg.DeadLetterTopic})
		}
	}
	entities = append(entities, s)
	apply := func(ctx context.Context, missing []topology.Entity) error {
		defer c.Close()
		for _, e := range missing {
			var err error
			switch {
			case e.Name == topic || e.Name == deadTopic:
				_, err = c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: e.Name})
			case e.Name == deadSub:
				_, err = c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: deadSub, Topic: deadTopic})
			case e.Name == sub:
				_, err = c.SubscriptionAdminClient.CreateSubscription(ctx, want)
			default:
				err = errors.New("unknown entity " + e.Name)
			}
			if err != nil {
				return openErr(fmt.Errorf("gcppubsub: create %s %s: %w", e.Kind, e.Name, err))
			}
		}
		return nil
	}
	return topology.NewPlan(entities, apply), nil
}

// projectOf is the project of a full name (projects/PROJECT/...).
func projectOf(full string) string {
	project, _, _ := strings.Cut(strings.TrimPrefix(full, "projects/"), "/")
	return project
}
