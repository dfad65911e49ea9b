package sbemu_test

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// A frame that declares more array elements than it has bytes (2^32-1
// nulls in 24 bytes) made rhea's decoder loop until the process ran out of
// memory. The emulator must close that connection and keep serving.
func TestProtocolHostileArrayCount(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "q"}}})
	if emu.Real {
		t.Skip("raw AMQP tests run against the emulator only")
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(emu.Port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("AMQP\x03\x01\x00\x00")); err != nil {
		t.Fatal(err)
	}
	// body: sasl-init descriptor, then an array32 of 0xffffffff nulls.
	body := []byte{0x00, 0x53, 0x41, 0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40, 0, 0, 0}
	frame := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(frame, uint32(8+len(body)))
	frame[4], frame[5] = 2, 1 // doff 2 (8 bytes), type 1 (SASL)
	frame = append(frame, body...)
	if len(frame) != 24 {
		t.Fatalf("frame is %d bytes", len(frame))
	}
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	// The server ends the connection: reading runs into EOF (or a reset).
	if _, err := io.Copy(io.Discard, c); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the emulator kept the hostile connection open")
		}
	}
	// And still serves everyone else.
	sess := rawConn(t, emu)
	if sess == nil {
		t.Fatal("no session after the hostile frame")
	}
}
