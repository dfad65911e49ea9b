package postgres_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/wary-go/wary/internal/servicetest"
)

// TestMain runs the package's tests and examples and checks that they
// leave no goroutine behind. The examples need the server at
// WARY_POSTGRES_URL (servicetest.Examples: defaultURL when unset, skipped
// when unreachable as serverURL skips the tests).
func TestMain(m *testing.M) {
	flag.Parse()
	servicetest.Examples("WARY_POSTGRES_URL", defaultURL, func(ctx context.Context, url string) error { return ping(url) })
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
