//go:build rabbit || sqsfifo || nats || gcppubsub

package main

import (
	"crypto/rand"
	"encoding/hex"
)

// newSuffix names what a test makes on a shared server.
func newSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
