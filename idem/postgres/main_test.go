package postgres_test

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// TestMain runs the package's tests and examples and checks that they
// leave no goroutine behind. The examples need the server at
// WARY_POSTGRES_URL (set here to defaultURL when unset), and an example
// cannot skip itself: when the server is unreachable, they are skipped
// here as serverURL skips the tests, unless WARY_POSTGRES_URL was set or
// WARY_REQUIRE_SERVICES=1 (then they fail).
func TestMain(m *testing.M) {
	flag.Parse()
	if _, set := os.LookupEnv("WARY_POSTGRES_URL"); !set {
		if os.Getenv("WARY_REQUIRE_SERVICES") == "1" || ping(defaultURL) == nil {
			_ = os.Setenv("WARY_POSTGRES_URL", defaultURL)
		} else {
			skip := "^Example"
			if s := flag.Lookup("test.skip").Value.String(); s != "" {
				skip = s + "|" + skip
			}
			_ = flag.Set("test.skip", skip)
		}
	}
	goleak.VerifyTestMain(m)
}

// ping connects to the server at url and pings it, within 5 seconds.
func ping(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}
