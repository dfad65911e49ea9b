package sqsfifo

import (
	"strings"

	"github.com/wary-go/wary/broker/driver"
)

var (
	_ driver.Describer = (*topic)(nil)
	_ driver.Describer = (*subscription)(nil)
)

// queueName is the last path segment of the queue URL: the queue's name,
// without the account and endpoint.
func (q *queue) queueName() string {
	if q == nil {
		return ""
	}
	return q.url[strings.LastIndexByte(q.url, '/')+1:]
}

// Describe names the queue for telemetry (driver.Describer).
func (t *topic) Describe() (system, destination string) { return "aws_sqs", t.q.queueName() }

// Describe names the queue for telemetry (driver.Describer).
func (s *subscription) Describe() (system, destination string) { return "aws_sqs", s.q.queueName() }
