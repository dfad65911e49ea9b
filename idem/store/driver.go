package store

// Driver is all a store implements for idem over transactions of type Tx:
// the inbox's part (Store), the outbox and relay's (OutboxStore), the
// idempotency keys' (KeyStore) and the operator's (Admin). A store may
// also implement the optional interfaces of the inbox (Early, Conflicts)
// and StreamStatuser; idem finds them by type assertion on the Driver.
type Driver[Tx any] interface {
	Store[Tx]
	OutboxStore[Tx]
	KeyStore[Tx]
	Admin[Tx]
}

// Provider is implemented by the type a store package hands its users
// (*postgres.Store, *sqlite.Store): idem's constructors take it and call
// Driver once, so that the driver's many methods stay off the user's type,
// as database/sql keeps a driver's methods off *sql.DB.
type Provider[Tx any] interface {
	// Driver returns the store's driver. Applications do not call it;
	// idem and wrappers of a store (tests, instrumentation) do.
	Driver() Driver[Tx]
}
