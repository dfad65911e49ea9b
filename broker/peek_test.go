package broker_test

import (
	"errors"
	"testing"
)

// TestPeekUnsupported: on a driver that cannot peek (the memory driver)
// Peek fails with errors.ErrUnsupported without receiving anything.
func TestPeekUnsupported(t *testing.T) {
	sub, _ := drainFixture(t)
	if _, err := sub.Peek(t.Context(), 5); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Peek: %v, want errors.ErrUnsupported", err)
	}
	ds, err := sub.Receive(t.Context(), 5)
	if err != nil || len(ds) != 5 {
		t.Fatalf("after Peek, Receive: %d, %v; want all five", len(ds), err)
	}
}
