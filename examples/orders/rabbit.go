//go:build rabbit

package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/wary-go/wary/drivers/rabbit" // registers rabbit://, amqp://, amqps://
	"github.com/wary-go/wary/redact"
)

// openRabbit prepares a run on the RabbitMQ topic at u (rabbit://EXCHANGE
// with the server in WARY_RABBIT_URL, or
// amqp://USER:PASS@HOST:PORT/VHOST?exchange=EXCHANGE): it declares the
// exchange and a queue EXCHANGE.billing, after deleting what an earlier
// run left, and returns the subscription URL (subURL, or one on that
// queue) and closer, which deletes them. Built in with -tags rabbit.
func openRabbit(ctx context.Context, u *url.URL, subURL string) (sub string, closer func(), err error) {
	server, exchange := os.Getenv(rabbit.ServerURLEnv), u.Host+strings.TrimSuffix(u.Path, "/")
	if u.Scheme != rabbit.Scheme {
		s := *u
		s.RawQuery = ""
		server, exchange = s.String(), u.Query().Get("exchange")
	}
	if server == "" || exchange == "" {
		return "", nil, fmt.Errorf("-broker %s: want rabbit://EXCHANGE with %s set, or amqp://USER:PASS@HOST:PORT/?exchange=EXCHANGE", redact.URL(u), rabbit.ServerURLEnv)
	}
	conn, err := rabbit.Dial(ctx, server, nil)
	if err != nil {
		return "", nil, err
	}
	topo := rabbit.Topology{Exchange: exchange, Queue: exchange + ".billing"}
	_ = topo.Delete(ctx, conn) // what an earlier run left
	if err := rabbit.Declare(ctx, conn, topo); err != nil {
		conn.Close()
		return "", nil, err
	}
	closer = func() {
		_ = topo.Delete(context.WithoutCancel(ctx), conn)
		conn.Close()
	}
	if subURL == "" {
		s := *u
		if u.Scheme == rabbit.Scheme {
			s.Host, s.Path, s.RawQuery = topo.Queue, "", "nack_delay=true"
		} else {
			s.RawQuery = url.Values{"queue": {topo.Queue}, "nack_delay": {"true"}}.Encode()
		}
		subURL = s.String()
	}
	return subURL, closer, nil
}
