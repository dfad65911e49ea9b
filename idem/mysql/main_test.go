package mysql_test

import (
	"context"
	"database/sql"
	"flag"
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/wary-go/wary/internal/servicetest"
)

// quiet is the stores' logger in tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// reach pings the server of dsn.
func reach(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// TestMain readies the examples, which run on the server of
// WARY_MYSQL_URL (skipped when it cannot be reached, as the tests are).
func TestMain(m *testing.M) {
	flag.Parse()
	servicetest.Examples("WARY_MYSQL_URL", defaultURL, reach)
	goleak.VerifyTestMain(m)
}
