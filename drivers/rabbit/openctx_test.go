package rabbit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/drivers/rabbit"
)

// TestOpenEndsWithCallersContext: while the server is out of reach,
// OpenTopic and OpenSubscription wait for the connection only as long as
// the caller's context lets them (the Conn's ReadyTimeout is an hour
// here), and return its error.
func TestOpenEndsWithCallersContext(t *testing.T) {
	p := newCutProxy(t, serverURL())
	dialCtx, cancelDial := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelDial()
	c, err := rabbit.Dial(dialCtx, p.url, &rabbit.ConnOptions{ReadyTimeout: time.Hour})
	if err != nil {
		dialURL(t, serverURL()) // skips, or fails with WARY_REQUIRE_SERVICES=1, when the server is out of reach
		t.Fatalf("through the proxy: %v", err)
	}
	defer c.Close()
	closed := c.Connection().NotifyClose(make(chan *amqp.Error, 1))
	p.cut()
	<-closed // the Conn's connection is gone, and no new one can be made

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := rabbit.OpenTopic(ctx, c, rabbit.Topology{Exchange: "amq.direct"}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenTopic: %v, want the caller's context.Canceled", err)
	}
	if _, err := rabbit.OpenSubscription(ctx, c, rabbit.Topology{Queue: "orders"}, &rabbit.SubscriptionOptions{Management: rabbit.ManagementOff}); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenSubscription: %v, want the caller's context.Canceled", err)
	}
}

// cutProxy forwards TCP connections to the server of an AMQP URL until
// cut, which closes them and stops listening.
type cutProxy struct {
	url string
	ln  net.Listener

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	p := &cutProxy{url: u.String(), ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() {
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
