package cli

import (
	"context"
	"fmt"
	"net/url"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/kafka"      // registers kafka://
	_ "github.com/wary-go/wary/drivers/memory"     // registers mem://
	_ "github.com/wary-go/wary/drivers/rabbit"     // registers rabbit://, amqp://, amqps://
	_ "github.com/wary-go/wary/drivers/servicebus" // registers servicebus://
	_ "github.com/wary-go/wary/drivers/sqsfifo"    // registers sqsfifo://
)

// withEnv completes a broker URL from the environment: kafka:// without
// brokers= gets $WARY_KAFKA_BROKERS, sqsfifo:// without endpoint= gets
// $WARY_SQS_ENDPOINT. rabbit:// and servicebus:// read their variables in
// their drivers.
func (a *app) withEnv(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("%s is not a broker URL (want SCHEME://NAME?PARAMS)", broker.RedactString(raw))
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
		return nil, fmt.Errorf("open topic %s: %w", broker.RedactString(raw), err)
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
		return nil, fmt.Errorf("open subscription %s: %w", broker.RedactString(raw), err)
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
		return nil, fmt.Errorf("open the dead letters of subscription %s: %w", broker.RedactString(raw), err)
	}
	return sub, nil
}
