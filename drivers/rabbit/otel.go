package rabbit

import (
	"strings"

	"github.com/wary-go/wary/broker/driver"
)

var (
	_ driver.Describer = (*topic)(nil)
	_ driver.Describer = (*subscription)(nil)
)

// Describe names the exchange for telemetry (driver.Describer).
func (t *topic) Describe() (system, destination string) { return "rabbitmq", t.exchange }

// Describe names the queue for telemetry (driver.Describer); a partitioned
// subscription is named by its base queue, without the partition suffix.
func (s *subscription) Describe() (system, destination string) {
	if len(s.queues) == 0 {
		return "rabbitmq", ""
	}
	q := s.queues[0]
	if s.o.Partitions > 1 || len(s.queues) > 1 {
		if i := strings.LastIndexByte(q, '.'); i > 0 {
			q = q[:i]
		}
	}
	return "rabbitmq", q
}
