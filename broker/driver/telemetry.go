package driver

// Describer is implemented by drivers that name, for telemetry, the
// messaging system they talk to and the destination a topic publishes to
// or a subscription reads from. The portable layer reports them as the
// OpenTelemetry attributes messaging.system and messaging.destination.name
// on spans and metrics. A driver that does not implement it is reported as
// system "wary" with no destination.
type Describer interface {
	// Describe returns the messaging system, in the spelling of the
	// OpenTelemetry semantic conventions ("rabbitmq", "kafka", "aws_sqs",
	// "servicebus"; "memory" for the in-process broker), and the
	// destination's name (exchange, topic, queue or subscription). Neither
	// may hold a secret: they are exported with every span and metric.
	Describe() (system, destination string)
}
