//go:build !sqsfifo

package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
)

// TestDriverNotBuiltIn: the default build has only the embedded broker; a
// URL of a driver left out fails, as invalid, with the command that builds
// it in.
func TestDriverNotBuiltIn(t *testing.T) {
	var out, errout bytes.Buffer
	err := run(t.Context(), []string{"-broker", "sqsfifo://orders.fifo?region=us-east-1&endpoint=http://127.0.0.1:1"}, &out, &errout)
	if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "go -C examples run -tags sqsfifo ./quickstart") {
		t.Fatalf("sqsfifo:// in the default build: %v, want ErrInvalid naming -tags sqsfifo", err)
	}
}
