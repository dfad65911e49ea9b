package outbox_test

import (
	"flag"
	"os"
	"testing"

	"github.com/wary-go/wary/internal/pgexample"
)

// TestMain readies the examples, which run on the PostgreSQL server at
// WARY_POSTGRES_URL (skipped when it cannot be reached, unless
// WARY_REQUIRE_SERVICES=1), so that the tests of this package, which a
// PostgreSQL user's go mod tidy loads, load no other store.
func TestMain(m *testing.M) {
	flag.Parse()
	pgexample.Ready()
	os.Exit(m.Run())
}
