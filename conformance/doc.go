// Package conformance is the suite every wary driver runs: it proves,
// against the live broker, the capabilities the driver declares.
//
// A driver's tests build a Harness (how to create a fresh topic and
// subscription, how broker time passes) and call Run:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{Name: "mydriver", Setup: setup})
//	}
//
// Run reads the driver's capabilities, each half from the side that
// declares it (TopicCapabilities from the fixture's topic,
// SubscriptionCapabilities from a subscription; every later fixture and
// subscription must declare the same), and runs every scenario as a
// subtest.
// A scenario whose capability is declared must pass; one whose capability is
// not declared is reported by name as "not applicable" with the reason, and
// where the absence itself is observable (no dedup window: a repeated ID is
// delivered twice; no NackDelay: a delayed nack fails with ErrUnsupported;
// per-message acks: an ack after an unacked message sticks) the scenario
// checks the absence instead. A declared promise the broker does not keep
// fails the suite, and so does an undeclared one the suite can see.
//
// Waiting is bounded by Harness.MaxWait. A scenario that would wait longer
// (for a lock timeout or a dedup window to pass) fails, because a harness
// is expected to configure its broker short enough for the suite (Config);
// only where Harness.FixedWaits says why the broker cannot be configured
// shorter is it reported as not applicable instead.
//
// Every field of both halves is proven by a scenario named after what it
// checks:
//
//   - Ordering: order-within-scope, per-key-serial-handler (OrderingKey
//     is a name, for docs and errors);
//     KeyRequired: key-required; HeadOfLine: head-of-line.
//   - DedupWindow: dedup-within-window, dedup-expires-after-window;
//     DedupScope: dedup-scope (one ID published in two message groups
//     arrives once under a queue scope, twice under a message-group
//     scope, and every time without a window).
//   - AckModel: ack-model, ack, crash-redelivers-unacked.
//   - DeliveryCount: delivery-count; DeliveryLimit: delivery-limit-dead-letters;
//     DeliveryLimitMode: delivery-count-across-restarts (a message held by
//     two consumers that close is delivered to a third as attempt 3 where
//     the broker counts, and as attempt 1 or 2 where the library counts and
//     the count goes with the consumer); DeadLetter: dead-letter-with-reason,
//     dead-letter-unsupported.
//   - LockTimeout: lock-expiry-redelivers, held-without-lock-timeout;
//     LockExtendable: lock-extension, lock-extension-unsupported;
//     NackDelay: nack-delay, nack-delay-unsupported.
//   - RedeliveryHorizon: redelivery-horizon (the topic and subscription
//     declare the horizon the harness configured, Harness.RedeliveryHorizon:
//     a horizon cannot be measured by waiting, so the harness states it).
//   - MaxMessageSize: oversized-rejected; MaxBatchSize: max-batch-size-split
//     (a publish of 2×MaxBatchSize+1 messages, or of 100 without a limit,
//     is split by the portable layer and every message arrives once, as
//     sent, in order where an order is declared).
//
// The other scenarios cover fidelity (binary bodies, headers, IDs, keys),
// settlement (nack, double settle), competing consumers checked by
// History, missing entities, invalid input, cancellation, close, and
// goroutine leaks. Scenarios returns their names.
//
// Probe runs the same scenarios outside of go test, for an operator's
// tool (cmd/wary probe): each scenario's outcome (kept, broken with the
// failure, or not applicable) goes to a Reporter as it ends, and a broken
// promise does not stop the others.
//
// History and OrderLog are the checkers the scenarios use, exported for
// end-to-end tests: History counts per message ID what was sent, delivered
// and applied, and reports lost and unexpected messages, duplicate
// deliveries (allowed) and duplicate effects (never allowed), in the
// manner of Jepsen's queue checker.
package conformance
