package rabbit

import (
	"net"
	"sync"
)

// corkMax is the most bytes a corkConn gathers before it writes them.
const corkMax = 64 << 10

// corkConn is the network connection under amqp091-go's. amqp091-go
// flushes its buffer after every publish, one write (a system call, and a
// segment RabbitMQ reads on its own) per message; while a batch is being
// published (hold … release), a corkConn gathers those writes and sends
// them in one, of at most about corkMax bytes. A write that fails is the
// error of the publish that caused it and of every later one; the
// messages gathered before it are then unconfirmed, and the channel's
// close fails them as maybe sent, as for any connection lost.
type corkConn struct {
	net.Conn

	mu    sync.Mutex
	holds int    // batches being published
	buf   []byte // writes gathered while holds > 0
	err   error  // the first write that failed
}

// hold starts gathering writes. c may be nil (no corking).
func (c *corkConn) hold() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.holds++
	c.mu.Unlock()
}

// release ends a hold; the last one writes what was gathered. A failed
// write closes the connection, so that amqp091-go's reader sees it end.
func (c *corkConn) release() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holds--
	if c.holds == 0 && c.flush() != nil {
		_ = c.Conn.Close()
	}
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.holds == 0 || len(p) >= corkMax {
		if err := c.flush(); err != nil {
			return 0, err
		}
		n, err := c.Conn.Write(p)
		if err != nil {
			c.err = err
		}
		return n, err
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= corkMax {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes what was gathered.
func (c *corkConn) flush() error {
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	if cap(c.buf) > 2*corkMax {
		c.buf = nil
	}
	if err != nil {
		c.err = err
	}
	return err
}
