package kafka

// Describe names the topic for telemetry (driver.Describer).
func (t *topic) Describe() (system, destination string) { return "kafka", t.name }

// Describe names the topic the consumer group reads for telemetry
// (driver.Describer).
func (s *subscription) Describe() (system, destination string) { return "kafka", s.topic }
