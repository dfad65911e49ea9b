// Package servicetest finds the local services (PostgreSQL, RabbitMQ)
// that tests run against, and skips or fails a test when one cannot be
// reached.
package servicetest

import (
	"context"
	"flag"
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

// Examples readies a package's runnable examples that need the service in
// env (def when unset), from TestMain after flag.Parse: an example cannot
// skip itself, so when the service cannot be reached (reach fails within
// 5 seconds) they are skipped here (^Example joins -test.skip), as URL
// skips a test, unless env is set or WARY_REQUIRE_SERVICES=1 (then they
// run and fail). When env is unset and the service answers at def, env is
// set to def for the examples to read.
func Examples(env, def string, reach func(ctx context.Context, url string) error) {
	if _, set := os.LookupEnv(env); set {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if os.Getenv("WARY_REQUIRE_SERVICES") == "1" || reach(ctx, def) == nil {
		_ = os.Setenv(env, def)
		return
	}
	skip := "^Example"
	if f := flag.Lookup("test.skip"); f != nil {
		if s := f.Value.String(); s != "" {
			skip = s + "|" + skip
		}
	}
	_ = flag.Set("test.skip", skip)
}
