// Package nats is the wary driver for NATS JetStream, on nats.go and its
// jetstream package.
package nats
