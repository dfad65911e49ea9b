package nats

import (
	"testing"
	"unsafe"
)

// TestDeliverySize: a delivery (its ackID, which holds its
// driver.Message) stays within 192 bytes on 64-bit platforms, so that a
// receive's slab of slabLen is a size class of the allocator.
func TestDeliverySize(t *testing.T) {
	if size := unsafe.Sizeof(ackID{}); size > 192 {
		t.Errorf("a delivery takes %d bytes, want at most 192", size)
	}
}
