package store

// Driver is what a store implements for idem's outbox, keys and operator
// over transactions of type Tx: the outbox and relay's part (OutboxStore),
// the idempotency keys' (KeyStore) and the operator's (Admin). A store may
// also implement StreamStatuser. The inbox's part is declared by package
// idem, which asserts a Driver to it.
type Driver[Tx any] interface {
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
