// Package defaults states, once, the defaults of the options that more than
// one of idem's packages applies: the relay's retry policy
// (outbox.RelayOptions), which the guarantee assumes for a zero field of
// guarantee.Outbox, and the inbox's gap attempts (idem.Options), which it
// assumes for guarantee.Inbox. The options a single package applies keep
// their defaults there.
package defaults

import (
	"time"

	"github.com/wary-go/wary/broker"
)

// Relay sets each zero (or negative) field of a relay's retry policy to
// its default: outbox.RelayOptions.MaxAttempts 10, Backoff 1s doubling to
// 5m, PublishTimeout 30s.
func Relay(maxAttempts *int, backoff *broker.Backoff, publishTimeout *time.Duration) {
	if *maxAttempts < 1 {
		*maxAttempts = 10
	}
	if *backoff == (broker.Backoff{}) {
		*backoff = broker.Backoff{Initial: time.Second, Max: 5 * time.Minute}
	}
	if *publishTimeout <= 0 {
		*publishTimeout = 30 * time.Second
	}
}

// InboxMaxAttempts sets a zero (or negative) idem.Options.MaxAttempts to
// its default, 5.
func InboxMaxAttempts(maxAttempts *int) {
	if *maxAttempts < 1 {
		*maxAttempts = 5
	}
}
