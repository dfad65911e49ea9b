// Package broker is wary's portable messaging API: topics to publish to,
// subscriptions to receive from, and deliveries to settle, over drivers for
// brokers that promise at-least-once delivery (in-memory, RabbitMQ, Kafka,
// SQS FIFO, Azure Service Bus). docs/broker.md says it all at length.
//
// Users hold *Topic, *Subscription and *Delivery, made by a driver's
// constructor (rabbit.OpenTopic, ...) or from a URL with OpenTopic and
// OpenSubscription once the driver package is imported. Drivers implement
// package broker/driver; validation, retries, error classification and
// the handler loop live here, once. Capabilities (package
// broker/capability) are each side's promise as data, proved by the
// conformance suite; what a broker does not promise, package idem does.
//
// Delivery is at least once: settle each delivery once with Ack, Nack or
// DeadLetter, or let Subscription.Run settle what its Handler returns. A
// consumer must be idempotent (package idem). Order holds only inside the
// declared scope, for messages of the same Key.
//
// Errors are *Error values classified with errors.Is (ErrNotFound,
// ErrInvalid, ErrRetryable, ...); a Publish error matches exactly one of
// ErrNotSent and ErrMaybeSent. Credentials never appear in errors or logs
// (package redact). Topics and subscriptions report OpenTelemetry spans
// and metrics through Telemetry's providers.
package broker
