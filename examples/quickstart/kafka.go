//go:build kafka

package main

// Built in with -tags kafka (see tagOf).
import _ "github.com/wary-go/wary/drivers/kafka" // registers kafka://
