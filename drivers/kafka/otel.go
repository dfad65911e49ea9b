package kafka

import "github.com/wary-go/wary/broker/driver"

var (
	_ driver.Describer = (*topic)(nil)
	_ driver.Describer = (*subscription)(nil)
)

// Describe names the topic for telemetry (driver.Describer).
func (t *topic) Describe() (system, destination string) { return "kafka", t.name }

// Describe names the topic the consumer group reads for telemetry
// (driver.Describer).
func (s *subscription) Describe() (system, destination string) { return "kafka", s.topic }
