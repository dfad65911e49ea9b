package postgres_test

import (
	"testing"

	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkRelay: rows/s published through the relay to the memory broker.
func BenchmarkRelay(b *testing.B) { idemtest.BenchRelay(b, newDB, outboxBroker) }

// BenchmarkRelayLatency: commit-to-publish latency at 1,000 rows/s, the
// relay woken by LISTEN/NOTIFY. Run with -benchtime=5000x.
func BenchmarkRelayLatency(b *testing.B) {
	idemtest.BenchRelayLatency(b, newDB, outboxBroker, idemtest.LatencyOptions{})
}

// BenchmarkRelayBacklog: relay batch 1 on a 2,000-row and a 200,000-row
// backlog, interleaved. Run with -benchtime=1000x.
func BenchmarkRelayBacklog(b *testing.B) {
	idemtest.BenchRelayBacklog(b, newDB, outboxBroker, 2000, 200000)
}
