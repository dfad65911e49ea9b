//go:build servicebus

package main

// Built in with -tags servicebus (see tagOf).
import _ "github.com/wary-go/wary/drivers/servicebus" // registers servicebus://
