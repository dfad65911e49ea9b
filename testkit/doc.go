// Package testkit runs a user's inbox handler through the faults of an
// at-least-once broker, and checks that each effect happened once.
//
// A Kit is a consumer set up as wary runs one, on the store the test hands
// New: SQLite returns a fresh SQLite store in t.TempDir() (the
// zero-configuration default), Postgres one in a fresh schema of a test
// database, MySQL one in a fresh database of a MySQL or MariaDB server;
// any *sqlite.Store, *mysql.Store, *postgres.Store or *postgres.SQLStore
// will do, and the kit is typed by its transactions (Kit[*sql.Tx],
// Kit[pgx.Tx]). The kit adds a
// topic and a subscription of the memory broker on a fake clock, and an
// inbox for the consumer (Inbox), with version checks if Options.Versions
// names the state table (idem.Options.Versions). Run publishes the test's
// events and delivers them to the test's handler through Inbox.Handle,
// behind the version checks if there are any, with faults injected:
//
//   - duplicates: every message is published twice, with the same ID;
//   - reorders: messages reach the broker in a shuffled order, the same for
//     the same Options.Seed. On the Queue profile (no order, the default),
//     any message may overtake any other, and every aggregate with two or
//     more events has at least one of them overtaken by a later one; on the
//     ordered profiles each key keeps the order of the events given to Run
//     (the broker promises it) and the keys interleave;
//   - a crash before commit: the first time the handler succeeds for a
//     message, the kit fails the delivery after it, so that the inbox rolls
//     the transaction back and the broker delivers the message again (as if
//     the process died before COMMIT);
//   - a crash between commit and ack: the first time the handler's effect
//     for a message commits, the acknowledgement is lost and the broker
//     delivers the message again (the inbox reports idem.ErrAckAfterCommit).
//
// All four are on unless Options turns them off, on either store. A test
// of a ledger's handler on PostgreSQL, for example:
//
//	func TestLedger(t *testing.T) {
//		store := testkit.Postgres(t, url) // a fresh schema of the test database at url
//		createTables(t, store.Pool())     // the test's own schema
//		kit := testkit.New(t, store, &testkit.Options{
//			Versions: idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
//		})
//		rep := kit.Run(apply, // an idem.Handler[pgx.Tx], reading the event with idem.ParseEvent
//			testkit.Event{AggregateID: "acct-1", Version: 1, Type: "opened", Body: []byte("100")},
//			testkit.Event{AggregateID: "acct-1", Version: 2, Type: "deposited", Body: []byte("5")})
//		t.Log(rep)
//		kit.AssertOnce(t, kit.CountRows(`SELECT message_id FROM ledger_effects`))
//		kit.AssertRows(t, `SELECT id, version, balance FROM accounts`, "acct-1 2 105")
//	}
//
// Run returns a Report of what happened: deliveries, the result of each
// (duplicates dropped, stale events, gaps retried, parked, held), the
// faults injected, the handler's failures, the park, the events held early
// behind a gap that did not close, and the dead letters. AssertOnce then
// reads the effects back (a Count, such as Kit.CountRows over an effects
// table) and fails the test for each effect that happened twice or not at
// all, saying what the kit saw of it (the handler ran after a rollback,
// the message is parked, held early or dead-lettered, the handler's last
// error); AssertRows checks the final state, which catches a stale event
// applied over newer state. Both read the store's database, in its
// dialect.
//
// # What a test may rely on
//
//   - Determinism: with the same Options, events and handler, Run delivers
//     the same messages in the same order with the same results. The
//     broker's clock is fake and moves only when nothing is deliverable;
//     every retry (the inbox's backoff, a gap) comes back after one step of
//     it, and the kit never sleeps.
//   - One delivery at a time: the handler runs on the goroutine that called
//     Run, never concurrently with itself.
//   - The real pieces: the inbox, the version checks, parking and the store
//     are the library's own, unchanged; only the delivery path is
//     wrapped, to lose acknowledgements and make the retries' delays
//     deterministic. The memory broker's deduplication window is off, so that
//     copies reach the inbox.
//   - Settled for good: Run returns when nothing is left to deliver. What the
//     inbox parked stays parked (Report.Parked; replay it with
//     Kit.Inbox().Replay or ReplayAll and the same handler, as an operator
//     would); an event held early stays held (Report.Early: its
//     predecessor never came; a later Run may deliver it); what was
//     dead-lettered is in Report.DeadLetters.
//   - A write outside the transaction shows: on PostgreSQL it commits on its
//     own and stays when the kit rolls the transaction back, so AssertOnce
//     finds the effect twice and says why. On the store SQLite returns, the
//     busy timeout is short, since the kit never has two transactions at
//     once, so such a write finds the database locked at once (SQLITE_BUSY); the
//     kit dead-letters that message with the reason instead of retrying it,
//     and AssertOnce names the cause.
//
// The Kit is for one test; its broker is closed when the test ends, and
// the stores of SQLite and Postgres are removed then. It is not safe for
// concurrent use.
package testkit
