package cli_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/wary-go/wary/idem/mysql"
	"github.com/wary-go/wary/internal/servicetest"
)

// mysqlPipe is a pipeline on a MySQL store in a fresh database of the
// server of WARY_MYSQL_URL (dropped when t ends; t skipped when the server
// cannot be reached) and a memory topic.
func mysqlPipe(t *testing.T) *pipe[*sql.Tx] {
	dsn := servicetest.URL(t, "WARY_MYSQL_URL", "root@tcp(127.0.0.1:3306)/test", func(ctx context.Context, dsn string) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "clitest_" + hex.EncodeToString(b[:])
	server, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = server.Exec("DROP DATABASE " + name)
		server.Close()
	})
	cfg.DBName = name
	st, err := mysql.Open(t.Context(), cfg.FormatDSN(), &mysql.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	topic := "mem://" + unique("orders")
	return &pipe[*sql.Tx]{store: sqliteShop(st), storeArgs: []string{"--mysql", cfg.FormatDSN()}, topicURL: topic,
		topic: mustOpenTopic(t, topic), sub: mustOpenSub(t, topic+"/billing")}
}

func TestMySQLMemoryParked(t *testing.T) { parkedWalkthrough(t, newWary(t), mysqlPipe(t)) }

func TestMySQLOutbox(t *testing.T) { outboxWalkthrough(t, newWary(t), mysqlPipe(t)) }
