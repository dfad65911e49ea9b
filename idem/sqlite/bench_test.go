package sqlite_test

import (
	"testing"

	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkInbox: messages/s through the inbox vs. the bare transaction.
func BenchmarkInbox(b *testing.B) { idemtest.Bench(b, newDB) }
