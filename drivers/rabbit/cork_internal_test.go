package rabbit

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// TestCorkGathersAndFails: held writes go out in one write at release,
// in order; once a write fails, every later one returns its error, and the
// release that failed closed the connection.
func TestCorkGathersAndFails(t *testing.T) {
	a, b := net.Pipe()
	c := &corkConn{Conn: a}
	got := make(chan []byte, 8)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, err := b.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- bytes.Clone(buf[:n])
		}
	}()
	c.hold()
	for _, s := range []string{"one ", "two ", "three"} {
		if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("held write %q: %d, %v", s, n, err)
		}
	}
	c.release()
	if w := <-got; string(w) != "one two three" {
		t.Fatalf("first write on the wire %q, want the three held writes in one", w)
	}
	if _, err := c.Write([]byte("direct")); err != nil { // not held: straight through
		t.Fatal(err)
	}
	if w := <-got; string(w) != "direct" {
		t.Fatalf("unheld write %q", w)
	}

	_ = b.Close() // the peer goes away
	for range got {
	}
	c.hold()
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatalf("held write: %v (it fails at release)", err)
	}
	c.release()
	if _, err := c.Write([]byte("after")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write after a failed release: %v, want %v", err, io.ErrClosedPipe)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the connection is still open after a failed release: %v", err)
	}
}
