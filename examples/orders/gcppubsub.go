//go:build gcppubsub

package main

// Built in with -tags gcppubsub (see tagOf).
import _ "github.com/wary-go/wary/drivers/gcppubsub" // registers gcppubsub://
