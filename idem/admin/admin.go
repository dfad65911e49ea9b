package admin

import (
	"context"
	"errors"

	"github.com/wary-go/wary/idem"
)

// Admin is an operator's handle on one store. It is safe for concurrent
// use, and holds nothing to close: the store's pool or database is the
// program's.
type Admin struct {
	d  backend
	db *sqlDB // nil: the store hands out no database (no audit table)
}

// Options configures an Admin. Nil means defaults.
type Options struct {
	// Schema and Prefix are the store's (postgres.Options,
	// mysql.Options or sqlite.Options): New checks that the store's
	// tables are there, and the audit table goes beside them. Prefix ""
	// means the stores' default, "wary_"; Schema "" the search_path's
	// first schema (PostgreSQL), the connection's database (MySQL) or the
	// main database (SQLite).
	Schema, Prefix string
}

// defaultPrefix is the stores' default table prefix.
const defaultPrefix = "wary_"

// ErrNoStore matches New's error when the store's tables are not where
// the options say (a wrong Schema or Prefix, or a database the program
// never migrated).
var ErrNoStore = errors.New("idem/admin: no wary store")

// New returns an Admin on the store st, a *postgres.Store, a
// *postgres.SQLStore, a *mysql.Store or a *sqlite.Store, opened by the caller (with SkipMigrate, for a tool that
// must not change the application's schema). It checks that the store's
// tables exist where opts says, and fails with an error matching
// ErrNoStore if they do not.
func New[Tx any](ctx context.Context, st idem.Store[Tx], opts *Options) (*Admin, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = defaultPrefix
	}
	d, db, err := open(st, o.Schema, o.Prefix)
	if err != nil {
		return nil, err
	}
	if db != nil {
		if err := db.checkStore(ctx); err != nil {
			return nil, err
		}
	}
	return &Admin{d: d, db: db}, nil
}
