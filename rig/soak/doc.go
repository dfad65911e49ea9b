// Package soak runs wary end to end under faults and checks the history:
// a producer writes versioned events through the transactional outbox
// (outbox.Outbox), relays publish them to a broker (outbox.Relay), and
// consumers apply them through the inbox with version checks
// (idem.Options.Versions), while a fault schedule derived from a seed kills
// and disturbs them.
//
// # Stores
//
// The inbox, the outbox and the soak's own tables (the consumers' version
// table and the effects table) live in one store: PostgreSQL through
// idem/postgres (Config.Postgres, the default; a fresh schema per run), or
// MySQL or MariaDB through idem/mysql (Config.MySQL, a DSN over
// tcp(HOST:PORT); a fresh database per run). The consumers' handler
// writes its rows in the inbox's transaction, a pgx.Tx or a *sql.Tx, with
// the same statements but for the placeholders, and the run checks both
// the same way. The workers reach the database through a TCP proxy (the
// URL's host or the DSN's address replaced by the proxy's), which
// database-reset cuts; the parent reaches it directly.
//
// # Faults
//
// The schedule holds these kinds (Kind), each at a point of progress (a
// fraction of the messages applied), in an order drawn from the seed:
//
//   - rebalance: the consumers grow from 1 to 3 at the start and shrink
//     back to 1 (SIGTERM, a clean close) near the end.
//   - consumer-kill: a consumer process that is handling messages is
//     killed with SIGKILL (twice), and a new one started.
//   - relay-kill: the relay process is killed with SIGKILL while it
//     publishes, and a new one started.
//   - database-reset: every worker connection to the store's database is
//     cut (the workers reach PostgreSQL or MySQL through an in-process
//     toxiproxy, stopped and started again). It was called postgres-reset
//     while PostgreSQL was the only store.
//   - broker-reset: every connection to the broker is cut (a toxiproxy in
//     front of it, or a Target-specific function such as a kfake control
//     that closes the connections of the next requests).
//   - broker-restart: the broker itself restarts or fails over, where the
//     Target can do it (kfake: partition leaders and group coordinators
//     move).
//   - lock-expiry: one handler, inside its transaction, takes longer than
//     the subscription's lock timeout, so the broker delivers its message
//     again while the first copy still holds the claim. Only where the
//     subscription declares a LockTimeout.
//
// Each fault must be seen to fire: a killed process was handling or
// publishing messages when it was killed and died of SIGKILL; a reset cut
// at least one established connection; the slow handler's message was
// delivered again while it ran. A run in which a scheduled fault did not
// fire fails. Kinds a target cannot do are reported as not applicable, with
// the reason.
//
// # Workers
//
// Consumers and relays are child processes: Run re-executes the current
// binary with the environment variable ChildEnv set, and the binary's
// main (or TestMain) must call ChildMain first. Children run in their own
// process group, which Run kills at the end and on every failure path, and
// exit when their standard input (a pipe from the parent) closes, so that
// none outlives a parent that died. A Target whose broker lives in the
// parent process (the memory driver) runs its workers as goroutines
// instead; a "kill" there closes the subscription or topic without
// settling and cancels the worker, which is as abrupt as the process can
// be to itself, but not a real SIGKILL.
//
// # Checks
//
// Every delivery, publish and slow handler is logged by the worker to a
// file of its own, one line per event, written with one system call (a
// SIGKILL loses none that were written). At the end Run builds a
// conformance.History (sent: the outbox rows committed; delivered: the
// logs; applied: the effect rows, committed in the inbox transaction) and
// a conformance.OrderLog of the effects per aggregate in commit order, and
// the run passes when nothing is lost, nothing unexpected arrived, no
// effect was applied twice, every aggregate's effects are in version
// order, and every scheduled fault fired. Duplicate deliveries are
// allowed and counted.
//
// Gaps and delivery limits: each consumer writes the growth of its
// inbox's gap counters (idem.Stats: Gaps, Early, EarlyApplied, Retried)
// to its log, and the report prints their sums with the subscription's
// delivery limit (Target.DeliveryLimit). Where the inbox holds gaps in the
// store (a subscription without order per aggregate), a run whose gaps
// were not held, or went back to the broker, fails; and where the target
// can count its dead-letter queue (Target.DeadLettered), a run with any
// dead letter fails.
package soak
