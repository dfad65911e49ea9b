package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// The store's transaction pool (Open): connections with autocommit off
// and the session's isolation level READ COMMITTED, set once when each
// connects (in the one SET go-sql-driver/mysql sends for the DSN's
// parameters). With autocommit off the first statement begins a
// transaction, so beginning one sends nothing: the inbox's transaction
// is its claim, the handler's statements and COMMIT, without START
// TRANSACTION or SET TRANSACTION ISOLATION LEVEL. A statement run on such
// a connection outside the store's transactions would begin one that
// nobody commits, so the pool is the store's own, used only through
// backend.Begin, whose transactions end by COMMIT or ROLLBACK; a
// connection whose COMMIT or ROLLBACK failed is discarded.

// txConfig returns cfg for the transaction pool: autocommit off and
// level (the variable, transaction_isolation or tx_isolation, that the
// server answered to) READ COMMITTED, whatever cfg's own parameters say
// of them.
func txConfig(cfg *gomysql.Config, level string) *gomysql.Config {
	c := cfg.Clone()
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	for k := range c.Params {
		switch k {
		case "autocommit", "tx_isolation", "transaction_isolation":
			delete(c.Params, k)
		}
	}
	c.Params["autocommit"] = "0"
	c.Params[level] = "'READ-COMMITTED'"
	return c
}

// openTxPool opens the transaction pool on cfg (see txConfig) with the
// limits of Options.TxConns.
func openTxPool(cfg *gomysql.Config, level string, conns int) (*sql.DB, error) {
	conn, err := gomysql.NewConnector(txConfig(cfg, level))
	if err != nil {
		return nil, fmt.Errorf("idem/mysql: open the transaction pool: %w", err)
	}
	db := sql.OpenDB(implicitConnector{conn})
	idle := defaultTxIdle
	if conns > 0 {
		db.SetMaxOpenConns(conns)
		idle = conns
	}
	db.SetMaxIdleConns(idle)
	db.SetConnMaxIdleTime(txIdleTime)
	return db, nil
}

// defaultTxIdle is how many idle connections the transaction pool keeps
// when Options.TxConns sets no limit; txIdleTime how long it keeps one.
const (
	defaultTxIdle = 32
	txIdleTime    = 5 * time.Minute
)

// implicitConnector makes the transaction pool's connections.
type implicitConnector struct{ sqldriver.Connector }

func (c implicitConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	mc, ok := dc.(mysqlConn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("idem/mysql: a connection of type %T, which lacks what go-sql-driver/mysql's have", dc)
	}
	return &implicitConn{mc}, nil
}

// mysqlConn is what go-sql-driver/mysql's connections implement and an
// implicitConn passes on (their own BeginTx aside).
type mysqlConn interface {
	sqldriver.Conn
	sqldriver.ConnPrepareContext
	sqldriver.ExecerContext
	sqldriver.QueryerContext
	sqldriver.Pinger
	sqldriver.SessionResetter // checks an idle connection is alive; sends nothing
	sqldriver.Validator
	sqldriver.NamedValueChecker
}

// implicitConn is a connection of the transaction pool: its BeginTx
// sends nothing.
type implicitConn struct{ mysqlConn }

func (c *implicitConn) Begin() (sqldriver.Tx, error) {
	return c.BeginTx(context.Background(), sqldriver.TxOptions{})
}

// BeginTx begins a transaction by sending nothing: the connection's
// first statement begins it. It refuses the options the session cannot
// give: another isolation level than READ COMMITTED, read only.
func (c *implicitConn) BeginTx(_ context.Context, o sqldriver.TxOptions) (sqldriver.Tx, error) {
	switch l := sql.IsolationLevel(o.Isolation); {
	case l != sql.LevelDefault && l != sql.LevelReadCommitted:
		return nil, fmt.Errorf("idem/mysql: the store's transactions are READ COMMITTED, not %v", l)
	case o.ReadOnly:
		return nil, errors.New("idem/mysql: the store's transactions cannot be read only")
	case !c.IsValid():
		return nil, sqldriver.ErrBadConn
	}
	return implicitTx{c}, nil
}

// implicitTx ends the connection's transaction.
type implicitTx struct{ c *implicitConn }

func (t implicitTx) Commit() error   { return t.end("COMMIT") }
func (t implicitTx) Rollback() error { return t.end("ROLLBACK") }

// end sends q; if it fails, the transaction's outcome on the connection
// is unknown, and sqldriver.ErrBadConn makes database/sql discard it (the
// server rolls back what a closed connection left open).
func (t implicitTx) end(q string) error {
	if _, err := t.c.ExecContext(context.Background(), q, nil); err != nil {
		return fmt.Errorf("idem/mysql: %s: %w (%w)", q, err, sqldriver.ErrBadConn)
	}
	return nil
}
