package sbemu_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// Performative descriptor codes (AMQP 1.0, 2.7).
const (
	perfOpen  = 0x10
	perfBegin = 0x11
	perfEnd   = 0x17
	perfClose = 0x18
)

// frameConn writes and reads raw AMQP frames, to send what no client
// library sends on purpose.
type frameConn struct {
	t *testing.T
	c net.Conn
}

func (f *frameConn) write(typ byte, channel uint16, body []byte) {
	f.t.Helper()
	hdr := make([]byte, 8)
	binary.BigEndian.PutUint32(hdr, uint32(8+len(body)))
	hdr[4], hdr[5] = 2, typ
	binary.BigEndian.PutUint16(hdr[6:], channel)
	if _, err := f.c.Write(append(hdr, body...)); err != nil {
		f.t.Fatalf("write: %v", err)
	}
}

// perform writes a performative whose fields are already encoded.
func (f *frameConn) perform(channel uint16, code byte, count byte, fields ...byte) {
	f.t.Helper()
	body := []byte{0x00, 0x53, code}
	if count == 0 {
		body = append(body, 0x45) // list0
	} else {
		body = append(body, 0xc0, byte(len(fields)+1), count)
		body = append(body, fields...)
	}
	f.write(0, channel, body)
}

// next reads frames, skipping empty ones, and returns the next
// performative's code and channel; an error means the connection went away.
func (f *frameConn) next() (code byte, channel uint16, err error) {
	f.t.Helper()
	for {
		hdr := make([]byte, 8)
		if _, err := io.ReadFull(f.c, hdr); err != nil {
			return 0, 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr)-8)
		if _, err := io.ReadFull(f.c, body); err != nil {
			return 0, 0, err
		}
		body = body[int(hdr[4])*4-8:]
		if len(body) < 3 {
			continue
		}
		return body[2], binary.BigEndian.Uint16(hdr[6:]), nil
	}
}

func (f *frameConn) expect(code byte, channel uint16) {
	f.t.Helper()
	got, ch, err := f.next()
	if err != nil {
		f.t.Fatalf("waiting for performative %#x on channel %d: %v (the emulator dropped the connection)", code, channel, err)
	}
	if got != code || ch != channel {
		f.t.Fatalf("got performative %#x on channel %d, want %#x on channel %d", got, ch, code, channel)
	}
}

func (f *frameConn) begin(channel uint16) {
	// remote-channel null, next-outgoing-id 0, both windows 255
	f.perform(channel, perfBegin, 4, 0x40, 0x43, 0x52, 0xff, 0x52, 0xff)
}

func dialFrames(t *testing.T, emu *sbemu.Emulator) *frameConn {
	t.Helper()
	if emu.Real {
		t.Skip("raw AMQP tests run against the emulator only (the service needs TLS and a real token)")
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(emu.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(opTimeout))
	f := &frameConn{t: t, c: c}
	readHeader := func(want []byte) {
		got := make([]byte, 8)
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("protocol header %q, %v; want %q", got, err, want)
		}
	}
	saslHdr, amqpHdr := []byte("AMQP\x03\x01\x00\x00"), []byte("AMQP\x00\x01\x00\x00")
	if _, err := c.Write(saslHdr); err != nil {
		t.Fatal(err)
	}
	readHeader(saslHdr)
	if code, _, err := f.next(); err != nil || code != 0x40 { // sasl-mechanisms
		t.Fatalf("sasl-mechanisms: %#x, %v", code, err)
	}
	// sasl-init: mechanism ANONYMOUS
	f.write(1, 0, append([]byte{0x00, 0x53, 0x41, 0xc0, 12, 1, 0xa3, 9}, "ANONYMOUS"...))
	if code, _, err := f.next(); err != nil || code != 0x44 { // sasl-outcome
		t.Fatalf("sasl-outcome: %#x, %v", code, err)
	}
	if _, err := c.Write(amqpHdr); err != nil {
		t.Fatal(err)
	}
	readHeader(amqpHdr)
	f.perform(0, perfOpen, 1, 0xa1, 1, 't') // container-id "t"
	f.expect(perfOpen, 0)
	return f
}

// An end on a channel whose session has already ended, or that never had
// one, is ignored: the connection stays up and its channels stay usable.
// go-amqp sends such ends when many sessions begin and end on one
// connection; rhea alone drops the connection.
func TestProtocolStaleEndKeepsConnection(t *testing.T) {
	emu, _ := env(t, sbemu.Topology{})
	f := dialFrames(t, emu)

	f.begin(0)
	f.expect(perfBegin, 0)
	f.perform(0, perfEnd, 0)
	f.expect(perfEnd, 0)
	f.perform(0, perfEnd, 0) // the session on channel 0 has ended
	f.perform(5, perfEnd, 0) // channel 5 never had a session

	// the connection still serves a new session, on the ended channel too
	f.begin(0)
	f.expect(perfBegin, 0)

	// and a session that received end twice before answering is ended once
	f.begin(1)
	f.expect(perfBegin, 1)
	f.perform(1, perfEnd, 0)
	f.perform(1, perfEnd, 0)
	f.expect(perfEnd, 1)

	st, err := emu.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.DroppedConnections != 0 || st.IgnoredEnds != 3 {
		t.Fatalf("stats %+v, want no dropped connection and 3 ignored ends", st)
	}
	f.perform(0, perfClose, 0)
	f.expect(perfClose, 0)
}
