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

// RetiredConsumers returns how many stopped consumers a dead-letter
// reader keeps open.
func RetiredConsumers(sub *broker.Subscription) int {
	var s *subscription
	if !sub.As(&s) {
		panic("not a rabbit subscription")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.retired)
}
