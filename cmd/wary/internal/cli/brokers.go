package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/gcppubsub"  // registers gcppubsub://
	_ "github.com/wary-go/wary/drivers/kafka"      // registers kafka://
	_ "github.com/wary-go/wary/drivers/memory"     // registers mem://
	_ "github.com/wary-go/wary/drivers/nats"       // registers nats://
	_ "github.com/wary-go/wary/drivers/rabbit"     // registers rabbit://, amqp://, amqps://
	_ "github.com/wary-go/wary/drivers/servicebus" // registers servicebus://
	_ "github.com/wary-go/wary/drivers/sqsfifo"    // registers sqsfifo://
	"github.com/wary-go/wary/redact"
)

// withEnv completes a broker URL from the environment: kafka:// without
// brokers= gets $WARY_KAFKA_BROKERS, sqsfifo:// without endpoint= gets
// $WARY_SQS_ENDPOINT. rabbit:// and servicebus:// read their variables in
// their drivers.
func (a *app) withEnv(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("%s is not a broker URL (want SCHEME://NAME?PARAMS)", redact.String(raw))
	}
	q := u.Query()
	set := func(param, env string) {
		if !q.Has(param) {
			if v := a.io.Getenv(env); v != "" {
				q.Set(param, v)
				u.RawQuery = q.Encode()
			}
		}
	}
	switch u.Scheme {
	case "kafka":
		set("brokers", EnvKafka)
	case "sqsfifo":
		set("endpoint", EnvSQS)
	}
	return u.String(), nil
}

// openTopic opens a topic URL.
func (a *app) openTopic(ctx context.Context, raw string) (*broker.Topic, error) {
	s, err := a.withEnv(raw)
	if err != nil {
		return nil, err
	}
	t, err := broker.OpenTopic(ctx, s)
	if err != nil {
		return nil, openFailed("open topic", raw, err)
	}
	return t, nil
}

// openSubscription opens a subscription URL.
func (a *app) openSubscription(ctx context.Context, raw string) (*broker.Subscription, error) {
	s, err := a.withEnv(raw)
	if err != nil {
		return nil, err
	}
	sub, err := broker.OpenSubscription(ctx, s)
	if err != nil {
		return nil, openFailed("open subscription", raw, err)
	}
	return sub, nil
}

// openDeadLetters opens the dead letters of the subscription a consumer's
// subscription URL names, through broker.OpenDeadLetters, for every
// driver.
func (a *app) openDeadLetters(ctx context.Context, raw string) (*broker.Subscription, error) {
	s, err := a.withEnv(raw)
	if err != nil {
		return nil, err
	}
	sub, err := broker.OpenDeadLetters(ctx, s)
	if err != nil {
		return nil, openFailed("open the dead letters of subscription", raw, err)
	}
	return sub, nil
}

// openFailed is the error of opening raw: what failed and the broker's
// error without its own "wary: open" prefix, and for a missing entity how
// to declare it.
func openFailed(what, raw string, err error) error {
	e := &brokerErr{what: what + " " + redact.String(raw), err: err}
	if errors.Is(err, broker.ErrNotFound) {
		e.hint = "declare what the URL describes with: wary topology URL --apply"
		if redact.String(raw) == raw {
			e.hint = "declare what the URL describes with: wary topology '" + raw + "' --apply"
		}
	}
	return e
}
