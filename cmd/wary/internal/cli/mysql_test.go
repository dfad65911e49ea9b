package cli_test

import (
	"database/sql"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/internal/mysqltest"
	"github.com/wary-go/wary/testkit"
)

// mysqlPipe is a pipeline on a MySQL store in a fresh database of the
// server of WARY_MYSQL_URL (testkit.MySQL: dropped when t ends; t skipped
// when the server cannot be reached) and a memory topic.
func mysqlPipe(t *testing.T) *pipe[*sql.Tx] {
	server := mysqltest.Server(t)
	st := testkit.MySQL(t, server)
	cfg, err := gomysql.ParseDSN(server)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&cfg.DBName); err != nil {
		t.Fatal(err)
	}
	topic := "mem://" + unique("orders")
	return &pipe[*sql.Tx]{store: sqliteShop(st), storeArgs: []string{"--mysql", cfg.FormatDSN()}, topicURL: topic,
		topic: mustOpenTopic(t, topic), sub: mustOpenSub(t, topic+"/billing")}
}

func TestMySQLMemoryParked(t *testing.T) { parkedWalkthrough(t, newWary(t), mysqlPipe(t)) }

func TestMySQLOutbox(t *testing.T) { outboxWalkthrough(t, newWary(t), mysqlPipe(t)) }
