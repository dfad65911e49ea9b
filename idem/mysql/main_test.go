package mysql_test

import (
	"flag"
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/internal/servicetest"
)

// quiet is the stores' logger in tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestMain readies the examples, which run on the server of
// WARY_MYSQL_URL (skipped when it cannot be reached, as the tests are).
func TestMain(m *testing.M) {
	flag.Parse()
	servicetest.Examples(mysqltest.Env, mysqltest.Default, mysqltest.Reach)
	goleak.VerifyTestMain(m)
}
