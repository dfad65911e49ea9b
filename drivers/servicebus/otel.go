package servicebus

import "github.com/wary-go/wary/broker/driver"

var (
	_ driver.Describer = (*topic)(nil)
	_ driver.Describer = (*subscription)(nil)
)

// Describe names the queue or topic for telemetry (driver.Describer).
func (t *topic) Describe() (system, destination string) { return "servicebus", t.entity }

// Describe names the queue or topic subscription for telemetry
// (driver.Describer).
func (s *subscription) Describe() (system, destination string) { return "servicebus", s.path.String() }
