package sqlite_test

import (
	"testing"

	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkRelay: rows/s published through the relay to the memory broker.
func BenchmarkRelay(b *testing.B) { idemtest.BenchRelay(b, newDB, outboxBroker) }

// BenchmarkRelayLatency: commit-to-publish latency at 1,000 rows/s, the
// relay woken by Relay.Wake after each commit (SQLite has no NOTIFY). Run
// with -benchtime=5000x.
func BenchmarkRelayLatency(b *testing.B) {
	idemtest.BenchRelayLatency(b, newDB, outboxBroker, idemtest.LatencyOptions{Wake: true})
}
