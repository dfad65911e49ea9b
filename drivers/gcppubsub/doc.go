// Package gcppubsub is the wary driver for Google Cloud Pub/Sub, on
// cloud.google.com/go/pubsub/v2.
package gcppubsub
