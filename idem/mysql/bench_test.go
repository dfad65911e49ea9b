package mysql_test

import (
	"database/sql"
	"testing"

	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkInbox: messages/s through the inbox vs. the bare transaction
// and the hand-written inbox (on MariaDB: INSERT ... ON DUPLICATE KEY
// UPDATE ... RETURNING 1 before the effect), interleaved.
func BenchmarkInbox(b *testing.B) { idemtest.Bench(b, newDB) }

// BenchmarkInboxReadCommitted is BenchmarkInbox on connections whose own
// level is READ COMMITTED (the DSN's tx_isolation), as the package doc
// recommends: no SET TRANSACTION before each transaction.
func BenchmarkInboxReadCommitted(b *testing.B) {
	idemtest.Bench(b, func(t testing.TB) idemtest.DB[*sql.Tx] {
		return testDB{db: openDB(t, map[string]string{"tx_isolation": "'READ-COMMITTED'"})}
	})
}

// BenchmarkRelay: rows/s published through the relay to the memory
// broker, from a backlog committed first.
func BenchmarkRelay(b *testing.B) { idemtest.BenchRelay(b, newDB, outboxBroker) }
