package rabbit

import (
	"context"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/redact"
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
// Topic parameters (the publisher's side): partitions, routing_key,
// max_message_size, skip_check (bool); "exchange" names the exchange in
// amqp:// URLs.
//
// Subscription parameters (the consumer's side): partitions, assigned
// (the share of partitions, SubscriptionOptions.Assigned: a
// comma-separated list of partitions and ranges, "0,1" or "0-3,8"),
// prefetch, delivery_limit (-1: NoDeliveryLimit), dead_letter_exchange,
// dead_letters_from, nack_delay (bool), management (the management API's
// address, SubscriptionOptions.Management, or "off"), and
// dead_letter_queue (read by OpenDeadLettersURL only), exchange (the
// exchange the queue is bound to, read by PlanTopologyURL only); "queue"
// names the queue in amqp:// URLs. PlanTopologyURL (behind
// topology.PlanURL and wary topology) reads a topic's and a
// subscription's URL, and declares what they describe.
// Concurrency is not a parameter: it is broker.RunOptions.Concurrency,
// from which Run sets the prefetch.
//
// In amqp:// URLs, amqp091-go's own parameters (heartbeat,
// connection_timeout, channel_max, auth_mechanism, certfile, keyfile,
// cacertfile, server_name_indication) go to the connection. Any other
// parameter, and a value that is not of the parameter's type (a number,
// a boolean), is an error matching broker.ErrInvalid that does not repeat
// the value.
type URLOpener struct {
	// ServerURL is the server for rabbit:// URLs. Default: the
	// environment variable WARY_RABBIT_URL.
	ServerURL string
	// ConnOptions are used for every connection. Nil: defaults.
	ConnOptions *ConnOptions
}

// String describes o without the password of its ServerURL.
func (o URLOpener) String() string {
	return "rabbit.URLOpener{ServerURL: " + strconv.Quote(redact.String(o.ServerURL)) + "}"
}

// GoString is String: %#v must not print ServerURL's password either.
func (o URLOpener) GoString() string { return o.String() }

var amqpParams = []string{"heartbeat", "connection_timeout", "channel_max", "auth_mechanism", "certfile", "keyfile", "cacertfile", "server_name_indication"}

// target splits u into the server URL, the entity name (from the host for
// rabbit://, from param for amqp://) and the parameters.
func (o *URLOpener) target(u *url.URL, param string) (server, name string, p *driver.URLParams, err error) {
	p = driver.NewURLParams(u)
	ambiguous := ambiguousURL(u)
	if u.Scheme == Scheme {
		// rabbit:NAME is fine, unless it holds an "@".
		ambiguous = strings.Contains(u.Opaque+u.EscapedPath()+u.RawQuery+u.EscapedFragment(), "@")
	}
	if ambiguous {
		// "amqp:user:pass@host", or userinfo holding a "/", "?" or "#"
		// that was not escaped: which part is the password cannot be told,
		// and later errors would repeat it.
		return "", "", nil, driver.Invalidf("rabbit: %s is not %s://[user:pass@]host:port/vhost?params (percent-encode reserved characters of the user and password, and an \"@\" elsewhere)", redactU(u), u.Scheme)
	}
	if u.Scheme == Scheme {
		p.NoUserinfo() // the server comes from ServerURL
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
			return "", "", nil, driver.Invalidf("rabbit: %s names no server: set URLOpener.ServerURL or %s", redactU(u), ServerURLEnv)
		}
		return server, name, p, nil
	}
	name = p.Get(param)
	if name == "" && param == "queue" {
		return "", "", nil, driver.Invalidf("rabbit: %s needs a %s parameter", redactU(u), param)
	}
	checkAMQPParams(p)
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

// ambiguousURL reports a URL whose userinfo cannot be told from the rest:
// opaque ("amqp:user:pass@host"), or with an unescaped "@" after its
// authority (a "/", "?" or "#" in a user or password that was not
// escaped; an "@" in a vhost or parameter is written %40).
func ambiguousURL(u *url.URL) bool {
	return u.Opaque != "" || strings.Contains(u.EscapedPath()+u.RawQuery+u.EscapedFragment(), "@")
}

// redactU renders u for errors without its secrets: as redactURL, and an
// opaque URL ("amqp:user:pass@host", or one whose password holds a "#"
// that was not escaped) as its scheme alone.
func redactU(u *url.URL) string {
	if u.Opaque != "" {
		return u.Scheme + ":" + redactedText
	}
	return redactURL(u.String())
}

// maxURLInt bounds the integer parameters of URLs.
const maxURLInt = math.MaxInt32

// checkAMQPParams reads amqp091-go's numeric URI parameters with p's typed
// getters, so that a malformed value is reported by p.Done as ErrInvalid
// naming the parameter (amqp091-go's own error echoes the value and has no
// class).
func checkAMQPParams(p *driver.URLParams) {
	p.Int("heartbeat", 0, 0, math.MaxUint16)
	p.Int("connection_timeout", 0, 0, maxURLInt)
	p.Int("channel_max", 0, 0, math.MaxUint16)
}

// partitionsParam reads a list of partitions and ranges ("0,2-4"); an
// empty list or element, a negative number or a reversed range is an
// error. Range and repetition are checked against Partitions at open.
func partitionsParam(p *driver.URLParams, name string, dst *[]int) error {
	if !p.Has(name) {
		return nil
	}
	v := p.Get(name)
	bad := func() error {
		return driver.Invalidf("rabbit: URL parameter %s is not a list of partitions (like 0,1 or 0-3,8)", name)
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

// OpenTopicURL opens rabbit://EXCHANGE?PARAMS or
// amqp://USER:PASS@HOST/VHOST?exchange=EXCHANGE&PARAMS.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	server, name, p, err := o.target(u, "exchange")
	if err != nil {
		return nil, err
	}
	var to TopicOptions
	top := Topology{Exchange: name}
	to.RoutingKey = p.Get("routing_key")
	top.Partitions = p.Int("partitions", 0, 0, maxURLInt)
	top.MaxMessageSize = p.Int("max_message_size", 0, 0, maxURLInt)
	to.SkipCheck = p.Bool("skip_check", false)
	if err := p.Done(); err != nil {
		return nil, err
	}
	c, err := Dial(ctx, server, o.ConnOptions)
	if err != nil {
		return nil, openErr(err)
	}
	t, err := openTopic(ctx, c, top, to)
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
	server, top, so, err := o.subscriptionURL(u)
	if err != nil {
		return nil, err
	}
	s, err := o.open(ctx, server, top, so)
	if err != nil {
		return nil, err
	}
	return broker.NewSubscription(s, nil), nil
}

// OpenDeadLettersURL opens the dead-letter queue of the subscription that
// rabbit://QUEUE?PARAMS or amqp://USER:PASS@HOST/VHOST?queue=QUEUE&PARAMS
// names: the consumer's own URL, with the same parameters.
//
// The dead-letter exchange is the URL's dead_letter_exchange, or
// Topology's name for it (QUEUE.dlx) when the URL has none; the
// dead-letter queue is the URL's dead_letter_queue, or Topology's name
// (QUEUE.dlq) when the exchange is Topology's. AMQP 0-9-1 cannot read a
// queue's arguments or an exchange's bindings, so a dead-letter exchange
// named otherwise needs dead_letter_queue in the URL (ErrInvalid without
// it); OpenSubscriptionURL accepts and ignores that parameter, so that
// the consumer's URL can carry it. The queue is read as
// OpenDeadLetters reads it: no delivery limit,
// DeadLettersFrom the dead-letter exchange, so that each message reports
// its reason. Of the other parameters, prefetch applies (by default
// deadLetterPrefetch: a reader such as `wary dlq list` holds every
// message it lists until it puts them back, and with the subscription
// default of 2 it would see only two); partitions and
// assigned are checked but do not apply (a partitioned topology has one
// dead-letter queue), nor do delivery_limit, nack_delay and
// dead_letters_from. A missing queue is ErrNotFound.
//
// The subscription reads as a reader does, not as a consumer that
// processes: its Nack (whatever the delay) puts the message back without
// counting a failed delivery where RabbitMQ can tell the two apart. It
// cancels the consumer first (basic.cancel), so that nothing put back is
// handed to it again, then sends basic.nack with requeue, never
// basic.reject: from RabbitMQ 4.3 a quorum queue counts basic.reject, and
// what a channel held when it closed, toward its delivery limit, and
// basic.nack not (before 4.3 every return counts once). What the broker
// had pushed ahead to the cancelled consumer goes back with the first
// Nack, and its channel closes once all it delivered is settled; a
// Receive after a Nack registers a new consumer. Close cancels the consumer and puts back
// with basic.nack all it holds, read or only prefetched, before it closes
// the channel. Its Capabilities state the dead-letter queue's own delivery
// limit as read from the broker: DeliveryLimit > 0, with a Conflict on
// SettingDeliveryLimit, when the queue has one (a queue Declare did not
// make), or SettingDeliveryLimit in Source.Unread when it could not be
// read; `wary explain` reports either.
func (o *URLOpener) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	server, top, so, err := o.subscriptionURL(u)
	if err != nil {
		return nil, err
	}
	// The URL's dead-letter exchange, or the topology's name for it.
	top.DeadLetter = true
	if top.DeadLetterQueue() == "" {
		return nil, driver.Invalidf("rabbit: the URL's dead_letter_exchange is not the topology's (the queue's name followed by .dlx): name the dead-letter queue with the URL parameter dead_letter_queue")
	}
	if so.Prefetch == 0 {
		so.Prefetch = deadLetterPrefetch
	}
	s, err := o.open(ctx, server, top.deadLetters(), SubscriptionOptions{
		Prefetch:   so.Prefetch,
		Management: so.Management,
	})
	if err != nil {
		return nil, err
	}
	s.reader = true
	return broker.NewSubscription(s, nil), nil
}

// deadLetterPrefetch is the prefetch of OpenDeadLettersURL's
// subscriptions when the URL states none: the most dead letters a
// listing can hold unsettled at once.
const deadLetterPrefetch = 1000

// subscriptionURL reads a subscription URL: the server, the topology of
// the queue it names (with the dead_letter_queue parameter, for
// OpenDeadLettersURL) and the options.
func (o *URLOpener) subscriptionURL(u *url.URL) (server string, top Topology, so SubscriptionOptions, err error) {
	server, name, p, err := o.target(u, "queue")
	if err != nil {
		return "", top, so, err
	}
	top = Topology{Queue: name}
	top.DeadLetterExchangeName = p.Get("dead_letter_exchange")
	top.DeadLettersFrom = p.Get("dead_letters_from")
	top.DeadLetterQueueName = p.Get("dead_letter_queue")
	_ = p.Get("exchange") // the exchange the queue is bound to, for PlanTopologyURL
	top.Partitions = p.Int("partitions", 0, 0, maxURLInt)
	so.Prefetch = p.Int("prefetch", 0, 0, math.MaxUint16)
	top.DeliveryLimit = p.Int("delivery_limit", 0, NoDeliveryLimit, maxURLInt)
	so.NackDelay = p.Bool("nack_delay", false)
	so.Management = p.Get("management")
	for _, err := range []error{
		partitionsParam(p, "assigned", &so.Assigned),
		p.Done(),
		checkAssigned(top.Partitions, so.Assigned),
	} {
		if err != nil {
			return "", top, so, err
		}
	}
	return server, top, so, nil
}

// open dials a Conn of the subscription's own and opens the driver's
// subscription on it.
func (o *URLOpener) open(ctx context.Context, server string, top Topology, so SubscriptionOptions) (*subscription, error) {
	c, err := Dial(ctx, server, o.ConnOptions)
	if err != nil {
		return nil, openErr(err)
	}
	s, err := openSubscription(ctx, c, top.Queue, top.settings(so))
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	s.ownConn = true
	return s, nil
}
