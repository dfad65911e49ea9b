// Package servicetest finds the local services (PostgreSQL, RabbitMQ)
// that tests run against, and skips or fails a test when one cannot be
// reached.
package servicetest

import (
	"context"
	"os"
	"testing"
	"time"
)

// URL returns the URL in the environment variable env, or def when env is
// unset. It skips t when the service cannot be reached (reach fails within
// 5 seconds), unless env is set or WARY_REQUIRE_SERVICES=1, which fail t
// instead.
func URL(t testing.TB, env, def string, reach func(ctx context.Context, url string) error) string {
	t.Helper()
	url, set := os.LookupEnv(env)
	if !set {
		url = def
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := reach(ctx, url); err != nil {
		if set || os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("%s unreachable: %v", env, err)
		}
		t.Skipf("unreachable at %s (set %s, or WARY_REQUIRE_SERVICES=1 to fail): %v", def, env, err)
	}
	return url
}
