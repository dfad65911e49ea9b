package memory

// Describe names the topic for telemetry (driver.Describer).
func (d *topicDriver) Describe() (system, destination string) { return "memory", d.name }

// Describe names the subscription ("topic/subscription") for telemetry
// (driver.Describer).
func (d *subDriver) Describe() (system, destination string) { return "memory", d.desc }
