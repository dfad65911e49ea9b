// Package admin is the operator's view of an idem store (idem/postgres,
// idem/mysql or idem/sqlite): what the inbox parked and holds early, what the outbox has
// not sent, the idempotency keys, and a record of what operators did. It
// is what cmd/wary's commands and its console use, and what a program of
// one's own can use to show or repair a store.
//
// An Admin is opened on the store a program hands idem (New), and runs
// no transaction of the caller's: each method reads or changes rows in
// its own. It lists, counts and discards parked messages (by consumer,
// aggregate or ID) and replays them to a topic (ReplayParked): each
// aggregate's messages are deleted from the park, their inbox claims
// forgotten, and they are published, in their replay order, with their
// original IDs, keys and headers and a wary-replayed-by header, in one
// transaction per aggregate that commits only after the broker confirmed
// every publish, so that a failed publish leaves them parked. Where the
// consumer runs its own handler instead, idem.Inbox.Replay applies them
// in the program.
//
// For the outbox it gives the backlog with the position of the stream's
// replication slot (OutboxStatus), lists rows, and requeues or discards
// them; for idempotency keys it lists them, the unresolved ones among
// them. The early events an inbox holds (idem.Options.Gaps) show as
// aggregates (Early), read-only.
//
// The audit table (PREFIXoperator_audit beside the store's tables) is the
// operators' own: CreateAudit creates it (the console does when it starts),
// Record adds an entry once it exists, and Audit lists the latest. It is
// not one of the store's migrations: the store's tables are the
// application's, migrated by the application, and an operator's tool
// keeps its records without changing the application's schema version.
package admin
