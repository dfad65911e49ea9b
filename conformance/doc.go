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
// Run reads the driver's Capabilities and runs every scenario as a subtest.
// A scenario whose capability is declared must pass; one whose capability is
// not declared is reported by name as "not applicable" with the reason, and
// where the absence itself is observable (no dedup window: a repeated ID is
// delivered twice; no NackDelay: a delayed nack fails with ErrUnsupported;
// per-message acks: an ack after an unacked message sticks) the scenario
// checks the absence instead. A declared promise the broker does not keep
// fails the suite, and so does an undeclared one the suite can see.
//
// The scenarios cover fidelity (binary bodies, headers, IDs, keys),
// settlement (ack, nack, delayed nack, double settle, dead-letter with a
// reason, delivery count and limit), locks (expiry and extension), ordering
// inside the declared scope under competing consumers, head-of-line
// blocking, the handler loop's per-key serial mode, dedup inside and after
// the window, crash redelivery and the ack model, missing entities,
// oversized and invalid input, cancellation, close, and goroutine leaks.
// Scenarios returns their names.
//
// History and OrderLog are the checkers the scenarios use, exported for
// end-to-end tests: History counts per message ID what was sent, delivered
// and applied, and reports lost and unexpected messages, duplicate
// deliveries (allowed) and duplicate effects (never allowed), in the
// manner of Jepsen's queue checker.
package conformance
