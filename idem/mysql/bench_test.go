package mysql_test

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/idemtest"
)

// BenchmarkInbox: messages/s through the inbox vs. the bare transaction
// and the hand-written inbox (on MariaDB: INSERT ... ON DUPLICATE KEY
// UPDATE ... RETURNING 1 before the effect), interleaved, with bare+1
// (bare with one more round trip, SELECT 1, in its transaction: the
// ceiling of an inbox that adds one round trip) and ceiling1 (a plain
// INSERT of the ID into the hand-written table as the first statement of
// a transaction of the store's pool, which sends nothing to begin it: the
// ceiling of any inbox that writes a row, in the inbox's own commands);
// each mode's statements
// (round trips) per message, the server's CPU per message (when it runs
// on this machine: the whole server's, whoever its clients), and the
// statements of its first turn in the log.
func BenchmarkInbox(b *testing.B) { benchInbox(b, nil) }

// BenchmarkInboxReadCommitted is BenchmarkInbox on connections whose own
// level is READ COMMITTED (the DSN's tx_isolation), as the package doc
// recommends: no SET TRANSACTION before each transaction.
func BenchmarkInboxReadCommitted(b *testing.B) {
	benchInbox(b, map[string]string{"tx_isolation": "'READ-COMMITTED'"})
}

func benchInbox(b *testing.B, params map[string]string) {
	var w wireCount
	idemtest.BenchMetered(b, func(t testing.TB) idemtest.DB[*sql.Tx] {
		return newTestDB(t, w.dsn(t, newDatabase(t, params)))
	}, idemtest.Meters{Statements: w.cmds.Load, ServerCPU: mariadbCPU(b), OneMore: true, ClaimFirst: true, Trace: func(on bool) []string {
		w.record.Store(on)
		return w.take()
	}})
}

// mariadbCPU returns a function giving the CPU time (user and system)
// the server has used so far, read from /proc by the process ID in its
// pid_file; nil, logged, when the server is not on this machine.
func mariadbCPU(b *testing.B) func() time.Duration {
	db, err := sql.Open("mysql", newDatabase(b, nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var file string
	if err := db.QueryRow("SELECT @@pid_file").Scan(&file); err != nil {
		b.Logf("server CPU: n/a (%v)", err)
		return nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Logf("server CPU: n/a (%v)", err)
		return nil
	}
	pid := strings.TrimSpace(string(raw))
	read := func() (time.Duration, error) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return 0, err
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return 0, fmt.Errorf("/proc/%s/stat: short", pid)
		}
		var ticks int64
		for _, x := range f[11:13] { // utime, stime: all its threads
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, err
			}
			ticks += n
		}
		return time.Duration(ticks) * 10 * time.Millisecond, nil // USER_HZ 100
	}
	if _, err := read(); err != nil {
		b.Logf("server CPU: n/a (%v)", err)
		return nil
	}
	return func() time.Duration {
		d, err := read()
		if err != nil {
			b.Fatalf("server CPU: %v", err)
		}
		return d
	}
}

// BenchmarkRelay: rows/s published through the relay to the memory
// broker, from a backlog committed first.
func BenchmarkRelay(b *testing.B) { idemtest.BenchRelay(b, newDB, outboxBroker) }
