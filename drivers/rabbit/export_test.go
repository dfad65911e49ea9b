package rabbit

import "github.com/wary-go/wary/broker"

// AckFrames returns how many basic.ack frames sub's SendAcks has sent.
func AckFrames(sub *broker.Subscription) int64 {
	var s *subscription
	if !sub.As(&s) {
		panic("not a rabbit subscription")
	}
	return s.ackFramesSent.Load()
}
