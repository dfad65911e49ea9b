package cli_test

import (
	"database/sql"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/testkit"
)

// mysqlPipe is a pipeline on a MySQL store in a fresh database of the
// server of WARY_MYSQL_URL (testkit.MySQL: dropped when t ends; t skipped
// when the server cannot be reached) and a memory topic.
func mysqlPipe(t *testing.T) *pipe[*sql.Tx] {
	_, shop, args := mysqlStore(t)
	topic := "mem://" + unique("orders")
	return &pipe[*sql.Tx]{store: shop, storeArgs: args, topicURL: topic,
		topic: mustOpenTopic(t, topic), sub: mustOpenSub(t, topic+"/billing")}
}

// mysqlStore is a MySQL store in a fresh database of the server of
// WARY_MYSQL_URL (testkit.MySQL), as the walkthroughs use it, and the
// flags that name it to wary.
func mysqlStore(t *testing.T) (*mysql.Store, shopStore[*sql.Tx], []string) {
	server := mysqltest.Server(t)
	st := testkit.MySQL(t, server)
	cfg, err := gomysql.ParseDSN(server)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&cfg.DBName); err != nil {
		t.Fatal(err)
	}
	return st, sqliteShop(st), []string{"--mysql", cfg.FormatDSN()}
}

func TestMySQLMemoryParked(t *testing.T) { parkedWalkthrough(t, newWary(t), mysqlPipe(t)) }

func TestMySQLOutbox(t *testing.T) { outboxWalkthrough(t, newWary(t), mysqlPipe(t)) }
