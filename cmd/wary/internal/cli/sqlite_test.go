package cli_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/wary-go/wary/idem/sqlite"
)

// sqlitePipe is a pipeline on a fresh SQLite file and a memory topic
// (memory.Default, which wary's mem:// URLs open in this process).
func sqlitePipe(t *testing.T) *pipe[*sql.Tx] { return sqlitePipeQuery(t, "") }

// sqlitePipeQuery is sqlitePipe with query ("?profile=partitioned") on the
// topic's and the subscription's URLs.
func sqlitePipeQuery(t *testing.T, query string) *pipe[*sql.Tx] {
	path := filepath.Join(t.TempDir(), "shop.db")
	st, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	name := "mem://" + unique("orders")
	return &pipe[*sql.Tx]{store: st, storeArgs: []string{"--sqlite", path}, topicURL: name + query,
		topic: mustOpenTopic(t, name+query), sub: mustOpenSub(t, name+"/billing"+query)}
}

func TestSQLiteMemoryParked(t *testing.T) { parkedWalkthrough(t, newWary(t), sqlitePipe(t)) }

func TestSQLiteOutbox(t *testing.T) { outboxWalkthrough(t, newWary(t), sqlitePipe(t)) }

func TestMemoryDLQ(t *testing.T) {
	p := sqlitePipe(t)
	dlqWalkthrough(t, newWary(t), p.topic, p.topicURL, p.sub, p.topicURL+"/billing", "1s")
}
