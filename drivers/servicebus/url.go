package servicebus

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/redact"
)

// Scheme is the URL scheme the package registers on broker.DefaultURLMux.
const Scheme = "servicebus"

// ConnectionStringEnv names the environment variable that holds the
// connection string for servicebus:// URLs (and that the package's tests
// read).
const ConnectionStringEnv = "WARY_SERVICEBUS_CONNECTION_STRING"

func init() {
	o := &URLOpener{}
	broker.DefaultURLMux().RegisterTopic(Scheme, o)
	broker.DefaultURLMux().RegisterSubscription(Scheme, o)
}

// URLOpener opens servicebus:// URLs. Each topic or subscription it opens
// has a client of its own, closed with it.
//
// The URL names the entity: servicebus://orders (a queue or topic),
// servicebus://orders/Subscriptions/billing, either followed by
// /$DeadLetterQueue for subscriptions; OpenDeadLettersURL (behind
// broker.OpenDeadLetters) opens the dead letters of the consumer's own
// URL, as OpenDeadLetters does. Parameters: read_entity (a boolean, default true: read the entity's
// properties through the administration API, at AdminEndpoint; false:
// take them from the parameters below, and say so in the capabilities'
// Source, where every one of them is unread) and sessions (bool); the
// publisher's side, TopicProperties: dedup_window (a Go duration),
// max_message_size (an integer); the consumer's side,
// SubscriptionProperties: lock_duration, ttl (Go durations),
// max_delivery_count (an integer); for subscriptions also max_sessions,
// session_idle, receive_wait and settle_timeout.
//
// With read_entity=true the entity's values apply, and a parameter of the
// side being opened that states another value is reported as a conflict
// in the capabilities' Source (Conflicts, with the fix), not as an error:
// the URL says what its author believes the entity holds. So that one URL
// names a queue for both sides, a topic's URL accepts the consumer's
// side's parameters and a subscription's the publisher's: they are
// checked, and compared with the entity when that side opens. Any other
// parameter, and a malformed value, is an error matching broker.ErrInvalid
// that names the parameter and never echoes its value. An administration
// API that does not answer fails the open with an *EntityReadError that
// says how to reach it.
type URLOpener struct {
	// ConnectionString for the namespace. Default: the environment
	// variable WARY_SERVICEBUS_CONNECTION_STRING. It is never printed.
	ConnectionString string
	// AdminEndpoint is where the administration client's requests go
	// (read_entity=true): http://127.0.0.1:PORT, an emulator's (plain http
	// is accepted on loopback only), or https://HOST[:PORT]. Default: the
	// environment variable WARY_SERVICEBUS_ADMIN_ENDPOINT, unless
	// AdminOptions has a Transport of its own; empty: the namespace's own
	// https endpoint. Setting both AdminEndpoint and AdminOptions.Transport
	// is ErrInvalid.
	AdminEndpoint string
	// ClientOptions and AdminOptions are passed to the clients it builds
	// (AdminOptions with its Transport replaced by AdminEndpoint's).
	ClientOptions *azservicebus.ClientOptions
	AdminOptions  *admin.ClientOptions
}

// String describes o without the shared access key of its
// ConnectionString.
func (o URLOpener) String() string {
	return "servicebus.URLOpener{ConnectionString: " + strconv.Quote(redact.String(o.ConnectionString)) + "}"
}

// GoString is String: %#v must not print the key either.
func (o URLOpener) GoString() string { return o.String() }

// clients builds the entity's clients (no administration client with
// read_entity=false) and says, for the capabilities' Source, how the
// entity's properties were given.
func (o *URLOpener) clients(u *url.URL, p *driver.URLParams) (string, *azservicebus.Client, *admin.Client, via, error) {
	p.NoUserinfo()
	entity := u.Host + u.Path
	if u.Opaque != "" {
		entity = u.Opaque
	}
	entity = strings.Trim(entity, "/")
	cs := o.ConnectionString
	if cs == "" {
		cs = os.Getenv(ConnectionStringEnv)
	}
	if cs == "" {
		return "", nil, nil, via{}, driver.Invalidf("servicebus: %s names no namespace: set URLOpener.ConnectionString or %s", redact.URL(u), ConnectionStringEnv)
	}
	if entity == "" {
		return "", nil, nil, via{}, driver.Invalidf("servicebus: %s names no entity", redact.URL(u))
	}
	client, err := azservicebus.NewClientFromConnectionString(cs, o.ClientOptions)
	if err != nil {
		// the SDK's message may quote the connection string
		return "", nil, nil, via{}, driver.Invalidf("servicebus: the connection string does not parse: %s", redact.String(err.Error()))
	}
	v := via{url: true, stated: p}
	var ac *admin.Client
	if p.Bool("read_entity", true) {
		ao, where, err := o.adminOptions()
		if err == nil {
			ac, err = admin.NewClientFromConnectionString(cs, ao)
			if err != nil {
				err = driver.Invalidf("servicebus: the connection string does not parse: %s", redact.String(err.Error()))
			}
		}
		if err != nil {
			_ = client.Close(context.Background())
			return "", nil, nil, via{}, err
		}
		v.adminAt = where
	}
	return entity, client, ac, v, nil
}

// adminOptions returns the administration client's options, and what
// names the endpoint they send to ("" for the namespace's own).
func (o *URLOpener) adminOptions() (*admin.ClientOptions, string, error) {
	ep, from := o.AdminEndpoint, "URLOpener.AdminEndpoint"
	own := o.AdminOptions != nil && o.AdminOptions.Transport != nil
	switch {
	case ep != "" && own:
		return nil, "", driver.Invalidf("servicebus: URLOpener.AdminEndpoint and AdminOptions.Transport both say where administration requests go: set one")
	case own:
		return o.AdminOptions, "URLOpener.AdminOptions.Transport", nil
	case ep == "":
		ep, from = os.Getenv(EnvAdminEndpoint), EnvAdminEndpoint
	}
	if ep == "" {
		return o.AdminOptions, "", nil
	}
	eo, _, err := AdminClientOptions(ep) // its transport keeps no idle connections
	if err != nil {
		return nil, "", driver.Invalidf("servicebus: %s: %w", from, err)
	}
	var ao admin.ClientOptions
	if o.AdminOptions != nil {
		ao = *o.AdminOptions
	}
	ao.Transport = eo.Transport
	return &ao, from, nil
}

const maxInt32 = 1<<31 - 1

// topicParams reads a topic URL's entity parameters (the publisher's side).
func topicParams(p *driver.URLParams) TopicProperties {
	return TopicProperties{
		RequiresSession:          p.Bool("sessions", false),
		DuplicateDetectionWindow: p.Duration("dedup_window", 0, 0, 7*24*time.Hour),
		MaxMessageSize:           p.Int("max_message_size", 0, sizeHeadroom+1, maxInt32),
	}
}

// subscriptionParams reads a subscription URL's entity parameters (the
// consumer's side).
func subscriptionParams(p *driver.URLParams) SubscriptionProperties {
	return SubscriptionProperties{
		RequiresSession:          p.Bool("sessions", false),
		LockDuration:             p.Duration("lock_duration", 0, time.Second, 5*time.Minute),
		DefaultMessageTimeToLive: p.Duration("ttl", 0, 0, capability.HorizonUnbounded),
		MaxDeliveryCount:         p.Int("max_delivery_count", 0, 1, maxInt32),
	}
}

// OpenTopicURL opens the queue or topic the URL names.
func (o *URLOpener) OpenTopicURL(ctx context.Context, u *url.URL) (*broker.Topic, error) {
	p := driver.NewURLParams(u)
	entity, client, ac, v, err := o.clients(u, p)
	if err != nil {
		return nil, err
	}
	opts := &TopicOptions{Admin: ac, Entity: topicParams(p), CloseClient: true, via: v}
	// One URL names a queue for both sides: a topic's URL may carry the
	// consumer's parameters, which are checked here and compared with the
	// entity when a subscription opens on them.
	_ = subscriptionParams(p)
	if err := p.Done(); err != nil {
		_ = client.Close(ctx)
		return nil, err
	}
	t, err := openTopic(ctx, client, entity, *opts)
	if err != nil {
		_ = client.Close(ctx)
		return nil, err
	}
	return broker.NewTopic(t, &opts.TopicOptions), nil
}

// OpenSubscriptionURL opens the queue, subscription or dead-letter queue
// the URL names.
func (o *URLOpener) OpenSubscriptionURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	return o.openSubscriptionURL(ctx, u, false)
}

// OpenDeadLettersURL opens the dead-letter queue of the queue or topic
// subscription the URL names (the consumer's own URL, with the same
// parameters): servicebus://QUEUE opens QUEUE/$DeadLetterQueue, and
// servicebus://TOPIC/Subscriptions/SUB opens
// TOPIC/Subscriptions/SUB/$DeadLetterQueue, as OpenDeadLetters opens
// them. A URL that names a dead-letter queue already is ErrInvalid: a
// dead-letter queue has none of its own.
func (o *URLOpener) OpenDeadLettersURL(ctx context.Context, u *url.URL) (*broker.Subscription, error) {
	return o.openSubscriptionURL(ctx, u, true)
}

// openSubscriptionURL opens the entity the URL names, or with dead its
// dead-letter queue.
func (o *URLOpener) openSubscriptionURL(ctx context.Context, u *url.URL, dead bool) (*broker.Subscription, error) {
	p := driver.NewURLParams(u)
	entity, client, ac, v, err := o.clients(u, p)
	if err != nil {
		return nil, err
	}
	opts := &SubscriptionOptions{
		via:         v,
		Admin:       ac,
		Entity:      subscriptionParams(p),
		MaxSessions: p.Int("max_sessions", 0, 1, 1000),
		SessionIdle: p.Duration("session_idle", 0, time.Millisecond, time.Hour),
		ReceiveWait: p.Duration("receive_wait", 0, time.Millisecond, time.Minute),
		CloseClient: true,
	}
	opts.SettleTimeout = p.Duration("settle_timeout", 0, time.Millisecond, 10*time.Minute)
	_ = topicParams(p) // the publisher's side, as a topic's URL accepts the consumer's
	if err := p.Done(); err != nil {
		_ = client.Close(ctx)
		return nil, err
	}
	open := OpenSubscription
	if dead {
		open = OpenDeadLetters
	}
	s, err := open(ctx, client, entity, opts)
	if err != nil {
		_ = client.Close(ctx)
		return nil, err
	}
	return s, nil
}
