package mysql_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// wireCount counts the commands the connections dialled through it send
// to the server: each a round trip (go-sql-driver/mysql waits for a
// command's answer before it sends the next). With record set, it keeps
// the text of each query (COM_QUERY) too, for a benchmark that shows one
// message's statements.
type wireCount struct {
	cmds   atomic.Int64
	record atomic.Bool
	mu     sync.Mutex
	log    []string
}

// wireNets numbers the networks registered for wireCounts.
var wireNets atomic.Int64

// dsn returns dsn with its connections dialled through w: a network of
// its own, registered with the driver, that dials TCP.
func (w *wireCount) dsn(t testing.TB, dsn string) string {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("wary-wire-%d", wireNets.Add(1))
	gomysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &wireConn{Conn: c, w: w}, nil
	})
	cfg.Net = name
	return cfg.FormatDSN()
}

// take returns the queries recorded since the last call.
func (w *wireCount) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log
	w.log = nil
	return l
}

type wireConn struct {
	net.Conn
	w *wireCount
}

// Write counts the command packets in p (sequence number 0: the first
// packet of a command); the driver writes each packet whole.
func (c *wireConn) Write(p []byte) (int, error) {
	for q := p; len(q) >= 5; {
		n := int(q[0]) | int(q[1])<<8 | int(q[2])<<16
		if q[3] == 0 {
			c.w.cmds.Add(1)
			if c.w.record.Load() {
				end := min(len(q), 4+n)
				s := fmt.Sprintf("cmd 0x%02x", q[4])
				if q[4] == 0x03 { // COM_QUERY
					s = string(q[5:end])
				}
				c.w.mu.Lock()
				c.w.log = append(c.w.log, s)
				c.w.mu.Unlock()
			}
		}
		if 4+n > len(q) {
			break
		}
		q = q[4+n:]
	}
	return c.Conn.Write(p)
}
