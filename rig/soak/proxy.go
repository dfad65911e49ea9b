package soak

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is an in-process toxiproxy in front of one upstream address; the
// soak's workers connect through it, and Reset cuts their connections.
type Proxy struct {
	p *toxiproxy.Proxy
}

// NewProxy starts a proxy on a free port of 127.0.0.1 in front of upstream
// (HOST:PORT).
func NewProxy(name, upstream string) (*Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("soak: toxiproxy %s: %w", name, err)
	}
	return &Proxy{p: p}, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.p.Listen }

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() { p.p.Stop() }

// Established counts the client connections to the proxy that are
// established now (read from the kernel's table; an error where it cannot
// be read).
func (p *Proxy) Established() (int, error) {
	_, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		return 0, err
	}
	return establishedOnPort(port)
}

// Reset cuts every connection through the proxy: it stops (closing them)
// and starts again on the same address, so that clients reconnect. It
// returns how many connections were established just before.
func (p *Proxy) Reset() (int, error) {
	n, err := p.Established()
	if err != nil {
		return 0, err
	}
	p.p.Stop()
	if err := p.p.Start(); err != nil {
		return n, fmt.Errorf("soak: restart toxiproxy %s: %w", p.p.Name, err)
	}
	return n, nil
}

// errNoTCPTable: the connection table cannot be read on this system, so a
// reset cannot be seen to fire.
var errNoTCPTable = errors.New("soak: /proc/net/tcp not readable: connection resets cannot be verified on this system")

// establishedOnPort counts ESTABLISHED sockets whose local port is port
// (decimal), from /proc/net/tcp and tcp6.
func establishedOnPort(port string) (int, error) {
	pn, err := strconv.Atoi(port)
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf(":%04X", pn)
	n, read := 0, false
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		read = true
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local_address rem_address st ...; 01 is ESTABLISHED.
			if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "01" {
				n++
			}
		}
		f.Close()
	}
	if !read {
		return 0, errNoTCPTable
	}
	return n, nil
}
