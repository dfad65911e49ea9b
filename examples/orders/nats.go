//go:build nats

package main

// Built in with -tags nats (see tagOf).
import _ "github.com/wary-go/wary/drivers/nats" // registers nats://
