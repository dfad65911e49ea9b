// Package mysqltest finds the MySQL or MariaDB server that tests run
// against (WARY_MYSQL_URL, a go-sql-driver/mysql DSN), and skips or fails a
// test when it cannot be reached. It is a package of its own, not part of
// servicetest, which the driver modules' tests import and which must not
// bring them the MySQL driver.
package mysqltest

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver

	"github.com/wary-go/wary/internal/servicetest"
)

// Env is the environment variable with the server's DSN, Default the DSN
// used when it is unset.
const (
	Env     = "WARY_MYSQL_URL"
	Default = "root@tcp(127.0.0.1:3306)/test"
)

// Reach pings the server of dsn.
func Reach(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// Server returns the server's DSN, or skips t when it cannot be reached
// (fails it when WARY_MYSQL_URL is set or WARY_REQUIRE_SERVICES=1).
func Server(t testing.TB) string {
	t.Helper()
	return servicetest.URL(t, Env, Default, Reach)
}
