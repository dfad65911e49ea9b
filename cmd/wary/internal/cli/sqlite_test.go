package cli_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/wary-go/wary/idem/sqlite"
)

// sqlitePipe is a pipeline on a fresh SQLite file and a memory topic
// (memory.Default, which wary's mem:// URLs open in this process).
func sqlitePipe(t *testing.T) *pipe[*sql.Tx] {
	path := filepath.Join(t.TempDir(), "shop.db")
	st, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	topicURL := "mem://" + unique("orders")
	return &pipe[*sql.Tx]{store: st, storeArgs: []string{"--sqlite", path}, topicURL: topicURL,
		topic: mustOpenTopic(t, topicURL), sub: mustOpenSub(t, topicURL+"/billing")}
}

func TestSQLiteMemoryParked(t *testing.T) { parkedWalkthrough(t, newWary(t), sqlitePipe(t)) }

func TestSQLiteOutbox(t *testing.T) { outboxWalkthrough(t, newWary(t), sqlitePipe(t)) }

func TestMemoryDLQ(t *testing.T) {
	p := sqlitePipe(t)
	dlqWalkthrough(t, newWary(t), p.topic, p.topicURL, p.sub, p.topicURL+"/billing/dead-letters", "1s")
}
