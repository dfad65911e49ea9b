package rabbit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/internal/servicetest"
)

// serverURL is the RabbitMQ the tests use; t is skipped when it is
// unreachable (failed with WARY_REQUIRE_SERVICES=1).
func serverURL(t *testing.T) string {
	t.Helper()
	return servicetest.URL(t, rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, u string) error {
		c, err := rabbit.Dial(ctx, u, nil)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// dial connects to the test server.
func dial(t *testing.T) *rabbit.Conn {
	t.Helper()
	c, err := rabbit.Dial(ctxT(t), serverURL(t), nil)
	if err != nil {
		t.Fatalf("RabbitMQ: %v", err)
	}
	return c
}

var nameSeq atomic.Int64

// uniqueName returns a name no other test uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("wary-test.%s.%d.%d", prefix, time.Now().UnixNano(), nameSeq.Add(1))
}

// declare declares a fresh topology and deletes it when t ends, or when
// the returned function is called, whichever comes first.
func declare(t *testing.T, c *rabbit.Conn, top rabbit.Topology) (rabbit.Topology, func()) {
	t.Helper()
	if err := rabbit.Declare(ctxT(t), c, top); err != nil {
		t.Fatalf("declare: %v", err)
	}
	del := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := top.Delete(ctx, c); err != nil {
			t.Errorf("delete topology: %v", err)
		}
	})
	t.Cleanup(del)
	return top, del
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
