package nats_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/nats"
)

// dropProxy forwards TCP connections to upstream; once dropping, it
// discards what the clients send (the server never reads it).
type dropProxy struct {
	ln       net.Listener
	upstream string
	dropping atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

func newDropProxy(t *testing.T, upstream string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, upstream: upstream}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(c, u) }()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 && !p.dropping.Load() {
					if _, werr := u.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *dropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestAckUnconfirmedFails: an ack the server did not read is reported
// failed (Ack and AckAll return once the server has read the acks, or
// fail), and its message is delivered again, while the acks the server
// read before are kept.
func TestAckUnconfirmedFails(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	const ackWait = time.Second
	spec := declare(t, js, nats.Spec{AckWait: ackWait})
	ctx := ctxT(t)
	const n = 6
	publishN(t, js, spec, n)
	p := newDropProxy(t, strings.TrimPrefix(url, "nats://"))
	pnc, err := natsgo.Connect("nats://"+p.ln.Addr().String(), natsgo.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer pnc.Close()
	pjs, err := jetstream.New(pnc)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nats.OpenSubscription(ctx, pjs, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	receiveAck(t, sub, n/2)
	second, err := sub.Receive(ctx, n/2)
	if err != nil || len(second) != n/2 {
		t.Fatalf("receive: %d, %v", len(second), err)
	}
	p.dropping.Store(true)
	actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	errs := broker.AckAll(actx, second)
	if len(errs) != len(second) {
		t.Fatalf("AckAll of acks the server never read: %v, want an error for each", errs)
	}
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the deadline's error", second[i].Message.ID, err)
		}
		if second[i].Settled() {
			t.Errorf("%s: settled after a failed ack", second[i].Message.ID)
		}
	}
	// The second half comes back (after its AckWait), the first does not.
	sub2, err := nats.OpenSubscription(ctx, js, spec.Stream, spec.Consumer, &nats.SubscriptionOptions{Subject: spec.Subject, NoPrefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	want := map[string]bool{}
	for _, d := range second {
		want[d.Message.ID] = true
	}
	for len(want) > 0 {
		ds, err := sub2.Receive(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if !want[d.Message.ID] {
				t.Fatalf("%s delivered again (attempt %d): its ack was confirmed", d.Message.ID, d.Attempt)
			}
			delete(want, d.Message.ID)
		}
		if errs := broker.AckAll(ctx, ds); errs != nil {
			t.Fatal(errs)
		}
	}
}
