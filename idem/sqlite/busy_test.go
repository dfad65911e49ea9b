package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wary-go/wary/idem/sqlite"
)

// TestBusyTimeoutAsDocumented: a connection opened with DSN waits for a
// lock as long as the package's documentation says, and every place that
// states the busy timeout states the same number.
func TestBusyTimeoutAsDocumented(t *testing.T) {
	db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(t.TempDir(), "busy.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var ms int64
	if err := db.QueryRowContext(t.Context(), "PRAGMA busy_timeout").Scan(&ms); err != nil {
		t.Fatal(err)
	}
	stated := regexp.MustCompile(`(?i)busy[ _]timeout\s+of\s+(\d+)\s+(?://\s*)?seconds`)
	seen := 0
	for _, f := range []string{"doc.go", "store.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range stated.FindAllStringSubmatch(string(b), -1) {
			seen++
			if n, _ := strconv.ParseInt(m[1], 10, 64); n*1000 != ms {
				t.Errorf("%s says %q, but PRAGMA busy_timeout is %d ms", f, strings.Join(strings.Fields(m[0]), " "), ms)
			}
		}
	}
	if seen < 2 {
		t.Errorf("found %d statements of the busy timeout in doc.go and store.go, want the package doc's and DSN's", seen)
	}
}
