//go:build sqsfifo

package main

// Built in with -tags sqsfifo (see tagOf).
import _ "github.com/wary-go/wary/drivers/sqsfifo" // registers sqsfifo://
