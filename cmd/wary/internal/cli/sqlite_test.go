package cli_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/outbox"
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
	return &pipe[*sql.Tx]{store: sqliteShop(st), storeArgs: []string{"--sqlite", path}, topicURL: name + query,
		topic: mustOpenTopic(t, name+query), sub: mustOpenSub(t, name+"/billing"+query)}
}

// sqliteShop is st as the walkthroughs use a store: a store on a
// *sql.DB (idem/sqlite, idem/mysql).
func sqliteShop(st interface {
	idem.Store[*sql.Tx]
	DB() *sql.DB
}) shopStore[*sql.Tx] {
	return shopStore[*sql.Tx]{store: st,
		newInbox: func(consumer string, caps capability.Subscription, o *idem.Options) (*idem.Inbox[*sql.Tx], error) {
			return idem.NewInbox(st, consumer, caps, o)
		},
		newOutbox: func() (*outbox.Outbox[*sql.Tx], error) { return outbox.New(st, nil) },
		newRelay: func(top *broker.Topic, o *outbox.RelayOptions) (*outbox.Relay, error) {
			return outbox.NewRelay(st, top, o)
		},
		inTx: func(ctx context.Context, f func(*sql.Tx) error) error {
			tx, err := st.DB().BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := f(tx); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		},
	}
}

func TestSQLiteMemoryParked(t *testing.T) { parkedWalkthrough(t, newWary(t), sqlitePipe(t)) }

func TestSQLiteOutbox(t *testing.T) { outboxWalkthrough(t, newWary(t), sqlitePipe(t)) }

func TestMemoryDLQ(t *testing.T) {
	p := sqlitePipe(t)
	dlqWalkthrough(t, newWary(t), p.topic, p.topicURL, p.sub, p.topicURL+"/billing", "1s")
}
