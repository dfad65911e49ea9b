package mysql

import "database/sql"

// SetReadLimit makes the store opened with o read outbox rows of at most
// n bytes, as if max_allowed_packet were n.
func SetReadLimit(o *Options, n int64) { o.readLimit = n }

// ForcePortable makes the store opened with o use the statements'
// portable forms, which MySQL runs, whatever the server.
func ForcePortable(o *Options) { o.portable = true }

// HasReturning is hasReturning.
var HasReturning = hasReturning

// Portable reports whether s uses the portable forms.
func Portable(s *Store) bool { return !s.returning }

// TxPool returns the store's transaction pool (nil on a store of New).
func TxPool(s *Store) *sql.DB { return s.be.tx }
