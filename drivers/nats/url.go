package nats

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

// Scheme is the URL scheme the package registers on broker.DefaultURLMux:
// nats://HOST:PORT/STREAM?consumer=NAME.
const Scheme = "nats"

func init() {
	o := &URLOpener{}
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens nats:// URLs. Each topic or subscription it opens has a
// connection of its own, closed with it.
//
// nats://[USER:PASSWORD@]HOST[:PORT]/STREAM?PARAMS. The path is the
// stream. Parameters: subject (TopicOptions.Subject,
// SubscriptionOptions.Subject), consumer (the durable pull consumer; a
// subscription needs it), wait_time (SubscriptionOptions.WaitTime),
// dead_letter_stream (SubscriptionOptions.DeadLetterStream), prefetch (a
// boolean, true by default; false sets SubscriptionOptions.NoPrefetch),
// dead_letters (a boolean: open the consumer's dead letters, as
// OpenDeadLetters does).
// ack_wait, max_deliver, max_ack_pending, duplicate_window and max_age
// say how PlanTopologyURL declares the stream and the consumer; a
// subscription compares the first three with the consumer's configuration
// and reports a difference as a Conflict in its capabilities' Source (the
// consumer's value applies). Any other parameter, and a malformed value,
// is an error matching broker.ErrInvalid that does not repeat the value.
// The password never appears in errors or logs.
type URLOpener struct {
	// Options, if not nil, are added to those of every connection the
	// opener makes (credentials files, TLS, reconnect policy).
	Options []natsgo.Option
}

// urlTarget is what a nats:// URL names.
type urlTarget struct {
	server, stream, consumer, subject, dlqStream string
	wait                                         time.Duration
	deadLetters, prefetch                        bool
	spec                                         Spec
	user, password                               string
}

func parseTarget(u *url.URL) (urlTarget, error) {
	var t urlTarget
	p := driver.NewURLParams(u)
	if u.User != nil {
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
	}
	if u.Host == "" {
		return t, driver.Invalidf("nats: the URL names no server (nats://HOST:PORT/STREAM)")
	}
	t.server = "nats://" + u.Host
	t.stream = strings.Trim(u.Path, "/")
	if t.stream == "" {
		return t, driver.Invalidf("nats: the URL names no stream (nats://HOST:PORT/STREAM)")
	}
	if err := validName("stream", t.stream); err != nil {
		return t, err
	}
	t.consumer = p.Get("consumer")
	t.subject = p.Get("subject")
	t.dlqStream = p.Get("dead_letter_stream")
	t.wait = p.Duration("wait_time", 0, 0, time.Hour)
	t.deadLetters = p.Bool("dead_letters", false)
	t.prefetch = p.Bool("prefetch", true)
	t.spec = Spec{
		Stream: t.stream, Subject: t.subject, Consumer: t.consumer, DeadLetterStream: t.dlqStream,
		AckWait:         p.Duration("ack_wait", 0, 0, 24*time.Hour),
		MaxDeliver:      p.Int("max_deliver", 0, -1, 1<<20),
		MaxAckPending:   p.Int("max_ack_pending", 0, -1, 1<<20),
		DuplicateWindow: p.Duration("duplicate_window", 0, 0, 365*24*time.Hour),
		MaxAge:          p.Duration("max_age", 0, 0, 100*365*24*time.Hour),
	}
	if err := p.Done(); err != nil {
		return t, err
	}
	return t, nil
}

// connect dials the URL's server; the connection's errors never carry
// the password.
func (o *URLOpener) connect(t urlTarget) (*natsgo.Conn, jetstream.JetStream, error) {
	opts := append([]natsgo.Option{natsgo.Name("wary")}, o.Options...)
	if t.user != "" {
		opts = append(opts, natsgo.UserInfo(t.user, t.password))
	}
	nc, err := natsgo.Connect(t.server, opts...)
	if err != nil {
		return nil, nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: connect to %s: %w", t.server, err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, driver.OpenError(driver.Invalid, fmt.Errorf("nats: %w", err))
	}
	return nc, js, nil
}

// OpenTopicURL opens nats://HOST:PORT/STREAM?PARAMS.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	t, err := parseTarget(u)
	if err != nil {
		return nil, err
	}
	nc, js, err := o.connect(t)
	if err != nil {
		return nil, err
	}
	tp, err := openTopic(ctx, js, t.stream, t.subject)
	if err != nil {
		nc.Close()
		return nil, err
	}
	tp.own = nc
	return broker.NewTopic(tp, nil), nil
}

// OpenSubscriptionURL opens nats://HOST:PORT/STREAM?consumer=NAME&PARAMS
// (with dead_letters, the consumer's dead letters).
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	return o.openSub(ctx, u, false)
}

// OpenDeadLettersURL opens, as OpenDeadLetters does, the dead letters of
// the consumer that nats://HOST:PORT/STREAM?consumer=NAME&PARAMS names
// (the consumer's own URL).
func (o *URLOpener) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	return o.openSub(ctx, u, true)
}

// openSub opens the consumer u names, or its dead letters when
// deadLetters or u's dead_letters say so.
func (o *URLOpener) openSub(ctx context.Context, u *url.URL, deadLetters bool) (*broker.Subscription, error) {
	t, err := parseTarget(u)
	if err != nil {
		return nil, err
	}
	deadLetters = deadLetters || t.deadLetters
	if t.consumer == "" {
		return nil, driver.Invalidf("nats: a subscription URL names its durable consumer (?consumer=NAME)")
	}
	if err := validName("consumer", t.consumer); err != nil {
		return nil, err
	}
	nc, js, err := o.connect(t)
	if err != nil {
		return nil, err
	}
	so := SubscriptionOptions{Subject: t.subject, WaitTime: t.wait, DeadLetterStream: t.dlqStream, NoPrefetch: !t.prefetch,
		stated: stated{ackWait: t.spec.AckWait, maxDeliver: t.spec.MaxDeliver, maxAckPending: t.spec.MaxAckPending}}
	var s *subscription
	if deadLetters {
		so.stated = stated{}
		s, err = openDeadLetters(ctx, js, t.stream, t.consumer, so)
	} else {
		s, err = openSubscription(ctx, js, t.stream, t.consumer, so)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.own = nc
	return broker.NewSubscription(s, nil), nil
}

// PlanTopologyURL plans (topology.PlanURL) what
// nats://HOST:PORT/STREAM?PARAMS names: the stream (capturing SUBJECT and
// SUBJECT.>), with consumer=NAME its durable pull consumer and the
// dead-letter stream. An existing entity's configuration is read and
// compared with the URL's; Apply creates what is missing (Declare) and
// changes nothing that exists.
func (o *URLOpener) PlanTopologyURL(ctx context.Context, u *url.URL) (*topology.Plan, error) {
	t, err := parseTarget(u)
	if err != nil {
		return nil, err
	}
	nc, js, err := o.connect(t)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ents, err := plan(ctx, js, t.spec)
	if err != nil {
		return nil, err
	}
	return topology.NewPlan(ents, func(ctx context.Context, _ []topology.Entity) error {
		nc, js, err := o.connect(t)
		if err != nil {
			return err
		}
		defer nc.Close()
		return Declare(ctx, js, t.spec)
	}), nil
}
