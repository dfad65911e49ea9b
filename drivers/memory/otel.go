package memory

import "github.com/wary-go/wary/broker/driver"

var (
	_ driver.Describer = (*topicDriver)(nil)
	_ driver.Describer = (*subDriver)(nil)
)

// Describe names the topic for telemetry (driver.Describer).
func (d *topicDriver) Describe() (system, destination string) { return "memory", d.name }

// Describe names the subscription ("topic/subscription") for telemetry
// (driver.Describer).
func (d *subDriver) Describe() (system, destination string) { return "memory", d.desc }
