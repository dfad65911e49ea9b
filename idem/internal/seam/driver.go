package seam

// Driver is the handle a store hands idem's constructors: its
// implementation of what they call, over transactions of type Tx. Each of
// idem, idem/outbox and idem/keys asserts the implementation to the
// interface it declares, once, when it is built. Tx keeps a store of one
// transaction type from a constructor of another (idem.NewInbox[pgx.Tx] of
// a SQLite store does not compile); the implementation stays opaque to
// users, as database/sql keeps a driver's methods off *sql.DB.
type Driver[Tx any] struct{ impl any }

// NewDriver returns the handle of a store whose implementation is impl.
func NewDriver[Tx any](impl any) Driver[Tx] { return Driver[Tx]{impl: impl} }

// Impl returns the store's implementation (nil for the zero Driver).
func (d Driver[Tx]) Impl() any { return d.impl }

// Provider is implemented by the type a store package hands its users
// (*postgres.Store, *sqlite.Store) and by wrappers of it: idem's
// constructors take it (as idem.Store) and call Driver once.
type Provider[Tx any] interface {
	// Driver returns the store's handle. Applications do not call it.
	Driver() Driver[Tx]
}
