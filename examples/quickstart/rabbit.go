//go:build rabbit

package main

// Built in with -tags rabbit (see tagOf).
import _ "github.com/wary-go/wary/drivers/rabbit" // registers rabbit://, amqp://, amqps://
