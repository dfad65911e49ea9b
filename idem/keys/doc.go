// Package keys makes external calls safe to retry with idempotency keys
// stored in the database, for a program on wary's stores (idem/postgres,
// idem/sqlite): New returns a Caller for one provider.
//
// A call to an external service (a payment, an e-mail) is outside every
// transaction; retrying it is safe only if the service recognises the
// retry. A Caller makes that systematic:
//
//  1. Caller.Stage stores the key and the intent in the caller's transaction,
//     with the decision to make the call; nothing is called yet.
//  2. After that transaction commits, Caller.Call records that the call
//     starts, makes it with the key, and records the outcome: succeeded
//     (with the result), failed for good (an error marked with
//     broker.Permanent), or unknown (any other error). Caller.CallStaged
//     makes the calls whose caller died between commit and call.
//  3. Every retry reuses the stored key. A call whose outcome is unknown
//     (an error, or a caller that died during the call) is sent again only
//     if the provider's Contract says it replays outcomes and the retry
//     comes before the provider forgets the key (Retention, less Margin).
//     Otherwise it waits for Caller.Reconcile, which asks a user-supplied
//     function what became of each unresolved key.
//
// The call never runs between staging and commit: a rollback would leave a
// call that the database does not know about.
//
// A key names one logical operation, such as "payment:order-42:attempt-1":
// the payment attempt, not the order (a second, deliberate attempt gets a
// new key) and not the request (a retry of the same attempt keeps it).
// Keys must not contain personal data (names, e-mail addresses, card
// numbers): they are sent to third parties, who log and keep them beyond
// any erasure request the application can honour, they appear in logs and
// error messages on both sides, and they are stored here in plain text and
// indexed. Use opaque identifiers.
package keys
