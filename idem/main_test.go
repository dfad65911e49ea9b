package idem_test

import (
	"testing"

	"github.com/wary-go/wary/internal/pgexample"
)

// TestMain runs the examples that need a store on PostgreSQL, skipped
// when the server cannot be reached (pgexample.Main).
func TestMain(m *testing.M) { pgexample.Main(m) }
