package rabbit_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/rabbit"
)

// serverURL is the RabbitMQ the tests use.
func serverURL() string {
	if u := os.Getenv("WARY_RABBIT_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// dial connects to the test server, or skips (fails with
// WARY_REQUIRE_SERVICES=1) when it is unreachable.
func dial(t conformance.T) *rabbit.Conn {
	t.Helper()
	return dialURL(t, serverURL())
}

func dialURL(t conformance.T, url string) *rabbit.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rabbit.Dial(ctx, url, nil)
	if err != nil {
		if os.Getenv("WARY_RABBIT_URL") == "" && os.Getenv("WARY_REQUIRE_SERVICES") != "1" {
			t.Skipf("RabbitMQ unreachable (set WARY_RABBIT_URL, or WARY_REQUIRE_SERVICES=1 to fail): %v", err)
		}
		t.Fatalf("RabbitMQ: %v", err)
	}
	return c
}

var nameSeq atomic.Int64

// uniqueName returns a name no other test uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("wary-test.%s.%d.%d", prefix, time.Now().UnixNano(), nameSeq.Add(1))
}

// declare declares a fresh topology and deletes it at cleanup, or when
// the returned function is called, whichever comes first.
func declare(t conformance.T, c *rabbit.Conn, top rabbit.Topology) (rabbit.Topology, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rabbit.Declare(ctx, c, top); err != nil {
		t.Fatalf("declare: %v", err)
	}
	var once sync.Once
	del := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := top.Delete(ctx, c); err != nil {
				t.Errorf("delete topology: %v", err)
			}
		})
	}
	t.Cleanup(del)
	return top, del
}
