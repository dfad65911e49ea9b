package nats

import "github.com/wary-go/wary/broker/driver"

var (
	_ driver.Describer = (*topic)(nil)
	_ driver.Describer = (*subscription)(nil)
)
