//go:build rabbit

package main

import (
	"context"
	"testing"

	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/internal/servicetest"
)

func TestRabbit(t *testing.T) {
	setRabbit(t)
	run(t, Config{Broker: "rabbit://wary-orders-test-" + newSuffix()})
}

// setRabbit points WARY_RABBIT_URL at a reachable RabbitMQ, or skips t
// (fails it under WARY_REQUIRE_SERVICES=1).
func setRabbit(t *testing.T) {
	t.Helper()
	url := servicetest.URL(t, rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, url string) error {
		c, err := rabbit.Dial(ctx, url, nil)
		if err != nil {
			return err
		}
		return c.Close()
	})
	t.Setenv(rabbit.ServerURLEnv, url)
}

func TestTelemetryRabbit(t *testing.T) {
	setRabbit(t)
	exchange := "wary-orders-otel-" + newSuffix()
	runTraced(t, Config{Broker: "rabbit://" + exchange}, "rabbitmq", exchange)
}
