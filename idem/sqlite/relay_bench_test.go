package sqlite_test

import (
	"testing"

	"github.com/wary-go/wary/idem/idemtest"
)

// BenchmarkRelay: rows/s published through the relay to the memory broker.
func BenchmarkRelay(b *testing.B) { idemtest.BenchRelay(b, newDB, outboxBroker) }
