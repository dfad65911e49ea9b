// Package outbox is the producer's half of wary's safety net: a
// transactional outbox (New, Outbox.Add) that writes events in the domain
// transaction, and a Relay that publishes them, on wary's stores
// (idem/postgres, idem/sqlite) and any broker driver.
//
// The inbox protects a consumer's write; a producer has the opposite
// problem, the dual write: it must commit its data and publish an event,
// and a crash between the two loses the event (publish after commit) or
// announces a change that never happened (publish before). Outbox.Add
// writes the event to an outbox table in the same transaction as the data
// (pgx.Tx or *sql.Tx), so both commit or neither does. Each row carries the
// message ID, the aggregate ID, the aggregate version, a per-aggregate
// sequence, a type, headers and the payload.
//
// The sequence is assigned in the adding transaction from a counter row per
// aggregate, which that transaction keeps locked until it ends: a second
// transaction adding to the same aggregate waits, so an aggregate's
// sequences commit in order, and a rolled-back transaction hands its
// sequences to the next one. Sequences have no gaps.
//
// A Relay publishes committed rows to a *broker.Topic and guarantees:
//
//   - Nothing committed is skipped. The relay selects rows by state (the
//     lowest unsent row of each aggregate), not by a position it has read
//     up to, so a row that an older transaction commits late is picked up
//     by the next claim. A rolled-back row never existed.
//   - Per-aggregate order. Only the lowest unsent row of an aggregate is
//     claimable, and the rows behind it are published after it, in
//     sequence order, by the relay that holds it. A claimed batch is handed
//     to the topic in one Publish call, so the driver keeps the whole batch
//     in flight (RabbitMQ: confirms outstanding on one channel; Kafka: one
//     produce), and Run takes the next batch while earlier ones wait for
//     the broker (postgres.SourceOptions.Pipeline). Several relays share
//     the work: on PostgreSQL they claim with FOR UPDATE SKIP LOCKED and
//     hold the locks while they publish; on SQLite one relay at a time
//     holds a lease (sqlite.SourceOptions.Lease), renewed while it
//     publishes, and the others
//     wait. A relay whose lease was taken stops publishing and marks
//     nothing. A claim finds the aggregates' heads through the index of
//     unsent rows, one aggregate per step, starting where the last claim
//     stopped: its cost does not grow with the backlog, and every
//     aggregate's turn comes.
//   - A failure in a batch. When a batch's Publish fails, the relay does
//     not know which of its messages reached the broker: it publishes the
//     batch again aggregate by aggregate (RelayOptions.Concurrency at a
//     time), each aggregate's rows one after the other, and stops an
//     aggregate at its first failure. That row and its aggregate's later
//     rows stay unsent and go again after it; the other rows are marked
//     sent. A consumer may then see, for that aggregate, rows twice (those
//     before the failure), and rows after the failed one before it (the
//     broker took them in the first attempt): a version check sees such a
//     later version as a gap and holds it (package idem, Version checks),
//     and the inbox acknowledges the copies that follow as duplicates.
//   - At least once, with a stable ID. A row is marked sent only after the
//     broker confirmed the publish. A relay that dies in between publishes
//     the row again after a restart, with the same message ID, which the
//     broker's dedup window or the consumer's inbox absorbs.
//   - Failures are contained. A failed publish is retried with backoff
//     (RelayOptions.Backoff); after MaxAttempts failures, or at once for a
//     message that can never be published (broker.ErrTooLarge,
//     broker.ErrInvalid), the row is quarantined. A quarantined row blocks
//     only its own aggregate, until an operator requeues (Relay.Requeue) or
//     discards it (Relay.Discard); other aggregates keep flowing.
//   - One bad row stops nothing else. Outbox.Add refuses what a relay
//     would not publish (ErrInvalidMessage: a blank message or aggregate
//     ID, headers the broker refuses). A row in the table that breaks the
//     same rules or does not decode (another writer's: headers that are
//     not a JSON object of strings, an empty message or aggregate ID) is
//     quarantined by the relay, polling or streaming, at once with that
//     error as its last error, never published and never failing the
//     claim or the stream: it holds its aggregate (the rows with the same
//     aggregate_id in the table, the empty one included) like any
//     quarantined row. The stream confirms past it.
//   - An operator can see it. Relay.Health reports the backlog, the age of
//     the oldest unsent row, the quarantined rows, the relay's throughput
//     and last error. Relay.Purge (and Run, periodically) deletes sent rows
//     after RelayOptions.KeepSent; the sequence counters stay.
//
// The relay is a forwarder: it takes batches from the source its store
// hands out (behind an interface internal to idem), publishes them and
// settles them; where the
// rows come from is the store's choice, set in its options. On PostgreSQL
// the polling source wakes on NOTIFY (received on a dedicated connection)
// and polls as a fallback, so that while the store answers a committed
// row that is due is claimed within RelayOptions.PollInterval; on SQLite
// it polls, and an in-process producer can call Relay.Wake. Producers
// notify only while a relay waits for them, in the statement that adds
// their rows (PostgreSQL serialises the commits of notifying
// transactions). How a source chooses between polling and waiting, and how
// its claim loops share a backlog, is tuning that may change: the comments
// in idem/internal/sqlcore/source.go and idem/postgres/wake.go describe it.
//
// With postgres.SourceOptions.Stream (PostgreSQL logical replication,
// docs/outbox-wal.md), the store's source reads committed rows from the
// database's log instead: the same guarantees, rows published in windows
// (each aggregate's in sequence, no order across aggregates), published rows deleted
// in bulk rather than marked sent, one relay per store streaming while
// others stand by, and the table polled while the server cannot stream.
// Rows the stream leaves in the table (a failure and its aggregate's later
// rows) are claimed from it as above. One kind of source serves an
// outbox: while its stream's slot exists, a polling relay stands by (Run)
// or fails with ErrOtherSource (RunOnce, Drain). A Discard from
// another process of a row the stream has not yet published may not stop
// it.
//
// A row becomes a message with Message.ID = the row's message ID (the
// broker's dedup ID), Message.Key = the aggregate ID (the ordering key),
// the headers broker.HeaderAggregateID, HeaderAggregateVersion,
// HeaderSequence and HeaderType over the row's own headers, and the
// payload as body.
//
// NewMessage builds a Message whose payload a broker.Codec encodes (JSON
// by default, as on the consumer's side), with the codec's content type in
// broker.HeaderContentType among the row's headers: the relay publishes
// it, and a typed consumer (idem.Typed, broker.Typed, broker.Decode)
// decodes the body or, when it names another encoding, refuses it
// (broker.ErrUndecodable) instead of misreading it. A Message written by
// hand carries no content type, and the consumer's check cannot tell.
//
// The order reaches consumers only if the broker keeps it per key (SQS FIFO
// message groups, Service Bus sessions, Kafka partitions); on other brokers
// the version checks and parking of package idem restore it.
package outbox
