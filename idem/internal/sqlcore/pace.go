package sqlcore

import "time"

// step is what a claim loop does after a claim: claim again at once, or
// wait for up to wait (and for a Wake, or landed closing).
type step struct {
	again  bool
	wait   time.Duration
	landed <-chan struct{} // another loop's large batch was marked
	idle   bool            // the relay goes idle (RelayStats.Idle)
}

// pace is the relay's poll policy, decided after each claim that claimed
// claimed rows (err: the claim or its publish failed):
//
//   - rows claimed and published: claim again at once, while there is work;
//   - a failure: wait poll, and try again;
//   - nothing claimed while another loop's large batch is in flight
//     (aloft returns a channel closed when it is marked): the relay is
//     behind, and the claim found nothing because that batch holds the
//     heads (on few aggregates, all of them). Until it is marked, claims
//     would find the same, each at the cost of a full one; so wait for it,
//     or poll at most (for a batch whose publish hangs). Behind small
//     batches the relay keeps up, and a claim that found nothing found
//     nothing new: poll as usual;
//   - nothing claimed otherwise: the relay goes idle, for as long as idle
//     says (the store's wake-up, if any; 0: poll; negative: claim once
//     more, since rows may have committed before a wake-up was set).
//
// aloft and idle are called only when their case is reached.
func pace(poll time.Duration, claimed int, err error, aloft func() <-chan struct{}, idle func() time.Duration) step {
	switch {
	case claimed > 0 && err == nil:
		return step{again: true}
	case err != nil:
		return step{wait: poll, idle: true}
	}
	if landed := aloft(); landed != nil {
		return step{wait: poll, landed: landed}
	}
	switch d := idle(); {
	case d < 0:
		return step{again: true}
	case d > 0:
		return step{wait: min(d, poll), idle: true}
	}
	return step{wait: poll, idle: true}
}
