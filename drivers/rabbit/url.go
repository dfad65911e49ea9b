package rabbit

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/wary-go/wary/broker"
)

// Schemes the package registers on broker.DefaultURLMux.
const (
	// Scheme: rabbit://NAME?PARAMS, the server from ServerURLEnv.
	Scheme = "rabbit"
	// SchemeAMQP and SchemeAMQPS: the server URL itself, the exchange or
	// queue in a parameter: amqp://user:pass@host:5672/vhost?queue=NAME.
	SchemeAMQP  = "amqp"
	SchemeAMQPS = "amqps"
)

// ServerURLEnv names the environment variable that holds the server URL
// for rabbit:// URLs (and that the package's tests read).
const ServerURLEnv = "WARY_RABBIT_URL"

func init() {
	o := &URLOpener{}
	for _, s := range []string{Scheme, SchemeAMQP, SchemeAMQPS} {
		broker.DefaultURLMux().RegisterTopic(s, o)
		broker.DefaultURLMux().RegisterSubscription(s, o)
	}
}

// URLOpener opens RabbitMQ URLs. Each topic or subscription it opens dials
// its own Conn, closed with it; share a Conn by calling OpenTopic and
// OpenSubscription instead.
//
// Topic parameters: partitions, routing_key, max_message_size,
// delivery_limit, dead_letter (bool), nack_delay (bool), no_check (bool);
// "exchange" names the exchange in amqp:// URLs.
//
// Subscription parameters: partitions, assigned (the share of
// partitions, SubscriptionOptions.Assigned: a comma-separated list of
// partitions and ranges, "0,1" or "0-3,8"), concurrency, prefetch,
// delivery_limit, dead_letter_exchange, nack_delay (bool),
// max_message_size; "queue" names the queue in amqp:// URLs.
//
// In amqp:// URLs, amqp091-go's own parameters (heartbeat,
// connection_timeout, channel_max, auth_mechanism, certfile, keyfile,
// cacertfile, server_name_indication) go to the connection. Any other
// parameter is an error.
type URLOpener struct {
	// ServerURL is the server for rabbit:// URLs. Default: the
	// environment variable WARY_RABBIT_URL.
	ServerURL string
	// ConnOptions are used for every connection. Nil: defaults.
	ConnOptions *ConnOptions
}

var amqpParams = []string{"heartbeat", "connection_timeout", "channel_max", "auth_mechanism", "certfile", "keyfile", "cacertfile", "server_name_indication"}

// target splits u into the server URL, the entity name (from the host for
// rabbit://, from param for amqp://) and the parameters.
func (o *URLOpener) target(u *url.URL, param string) (server, name string, p *broker.URLParams, err error) {
	p = broker.NewURLParams(u)
	if u.Scheme == Scheme {
		name = u.Host
		if u.Path != "" && u.Path != "/" {
			name += u.Path
		}
		if u.Opaque != "" {
			name = u.Opaque
		}
		server = o.ServerURL
		if server == "" {
			server = os.Getenv(ServerURLEnv)
		}
		if server == "" {
			return "", "", nil, broker.Invalidf("rabbit: %s names no server: set URLOpener.ServerURL or %s", broker.Redact(u), ServerURLEnv)
		}
		return server, name, p, nil
	}
	name = p.Get(param)
	if name == "" && param == "queue" {
		return "", "", nil, broker.Invalidf("rabbit: %s needs a %s parameter", broker.Redact(u), param)
	}
	s := *u
	q := url.Values{}
	for _, k := range amqpParams {
		if p.Has(k) {
			q.Set(k, p.Get(k))
		}
	}
	s.RawQuery = q.Encode()
	return s.String(), name, p, nil
}

func intParam(p *broker.URLParams, name string, dst *int) error {
	if v := p.Get(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return broker.Invalidf("rabbit: URL parameter %s=%q is not a non-negative integer", name, v)
		}
		*dst = n
	}
	return nil
}

// partitionsParam reads a list of partitions and ranges ("0,2-4"); an
// empty list or element, a negative number or a reversed range is an
// error. Range and repetition are checked against Partitions at open.
func partitionsParam(p *broker.URLParams, name string, dst *[]int) error {
	if !p.Has(name) {
		return nil
	}
	v := p.Get(name)
	bad := func() error {
		return broker.Invalidf("rabbit: URL parameter %s=%q is not a list of partitions (like 0,1 or 0-3,8)", name, v)
	}
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil && n >= 0
	}
	out := []int{}
	for _, e := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(e, "-")
		a, ok := num(lo)
		if !ok {
			return bad()
		}
		b := a
		if isRange {
			if b, ok = num(hi); !ok || b < a {
				return bad()
			}
		}
		if b-a >= maxURLPartitions || len(out)+b-a >= maxURLPartitions {
			return bad()
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	*dst = out
	return nil
}

// maxURLPartitions bounds what a URL's list of partitions expands to.
const maxURLPartitions = 1 << 16

func boolParam(p *broker.URLParams, name string, dst *bool) error {
	if v := p.Get(name); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return broker.Invalidf("rabbit: URL parameter %s=%q is not a boolean", name, v)
		}
		*dst = b
	}
	return nil
}

// OpenTopicURL opens rabbit://EXCHANGE?PARAMS or
// amqp://USER:PASS@HOST/VHOST?exchange=EXCHANGE&PARAMS.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	server, name, p, err := o.target(u, "exchange")
	if err != nil {
		return nil, err
	}
	var to TopicOptions
	to.RoutingKey = p.Get("routing_key")
	for _, f := range []error{
		intParam(p, "partitions", &to.Partitions),
		intParam(p, "max_message_size", &to.MaxMessageSize),
		intParam(p, "delivery_limit", &to.DeliveryLimit),
		boolParam(p, "dead_letter", &to.DeadLetter),
		boolParam(p, "nack_delay", &to.NackDelay),
		boolParam(p, "no_check", &to.NoCheck),
		p.Done(),
	} {
		if f != nil {
			return nil, f
		}
	}
	c, err := Dial(ctx, server, o.ConnOptions)
	if err != nil {
		return nil, openErr(err)
	}
	t, err := openTopic(ctx, c, name, &to)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	t.ownConn = true
	return broker.NewTopic(t, nil), nil
}

// OpenSubscriptionURL opens rabbit://QUEUE?PARAMS or
// amqp://USER:PASS@HOST/VHOST?queue=QUEUE&PARAMS.
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	server, name, p, err := o.target(u, "queue")
	if err != nil {
		return nil, err
	}
	var so SubscriptionOptions
	so.DeadLetterExchange = p.Get("dead_letter_exchange")
	for _, f := range []error{
		intParam(p, "partitions", &so.Partitions),
		partitionsParam(p, "assigned", &so.Assigned),
		intParam(p, "concurrency", &so.Concurrency),
		intParam(p, "prefetch", &so.Prefetch),
		intParam(p, "delivery_limit", &so.DeliveryLimit),
		intParam(p, "max_message_size", &so.MaxMessageSize),
		boolParam(p, "nack_delay", &so.NackDelay),
		p.Done(),
		checkAssigned(so.Partitions, so.Assigned),
	} {
		if f != nil {
			return nil, f
		}
	}
	c, err := Dial(ctx, server, o.ConnOptions)
	if err != nil {
		return nil, openErr(err)
	}
	s, err := openSubscription(ctx, c, name, &so)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	s.ownConn = true
	return broker.NewSubscription(s, nil), nil
}
