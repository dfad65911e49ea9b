package gcppubsub

import "github.com/wary-go/wary/broker/driver"

var (
	_ driver.Describer = (*topic)(nil)
	_ driver.Describer = (*subscription)(nil)
)

// Describe names the topic for telemetry (driver.Describer), in the
// OpenTelemetry semantic conventions' spelling of the system.
func (t *topic) Describe() (system, destination string) { return "gcp_pubsub", shortName(t.name) }

// Describe names the subscription for telemetry (driver.Describer).
func (s *subscription) Describe() (system, destination string) {
	return "gcp_pubsub", shortName(s.cfg.Name)
}
