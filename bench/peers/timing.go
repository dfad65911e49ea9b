package main

import (
	"fmt"
	"time"

	"github.com/wary-go/wary/idem/outbox"
)

// relayTiming is the relay's batches, as its stats count them: how long
// the publishing of each batch (from the source's Next to Settle) and its
// Settle (mark sent) take.
type relayTiming struct {
	Batches, Rows int
	Publish, Mark time.Duration
}

func timingOf(s outbox.RelayStats) relayTiming {
	return relayTiming{Batches: int(s.Claims), Rows: int(s.Published), Publish: s.PublishTime, Mark: s.SettleTime}
}

// String gives the means per batch.
func (t relayTiming) String() string {
	if t.Batches == 0 {
		return "no batches"
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(t.Batches) }
	return fmt.Sprintf("%d batches of %.0f rows: publish %.1f ms, mark %.1f ms",
		t.Batches, float64(t.Rows)/float64(t.Batches), per(t.Publish), per(t.Mark))
}

// settled is relay's timing once it counts n rows published: the consumer
// may have every message before the relay settled the last batch, so it
// waits (up to 10 s) for every batch to be counted.
func settled(relay *outbox.Relay, n int) relayTiming {
	rs := relay.Stats()
	for deadline := time.Now().Add(10 * time.Second); rs.Published < int64(n) && time.Now().Before(deadline); rs = relay.Stats() {
		time.Sleep(time.Millisecond)
	}
	return timingOf(rs)
}
