package broker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/internal/seam"
	"github.com/wary-go/wary/broker/internal/text"
)

// TopicURLOpener opens a topic from a URL; drivers register one per scheme.
type TopicURLOpener interface {
	OpenTopicURL(ctx context.Context, u *url.URL) (*Topic, error)
}

// SubscriptionURLOpener opens a subscription from a URL.
type SubscriptionURLOpener interface {
	OpenSubscriptionURL(ctx context.Context, u *url.URL) (*Subscription, error)
}

// DeadLetterURLOpener opens the dead letters of the subscription a URL
// names. A driver's SubscriptionURLOpener implements it where the driver
// can find a subscription's dead-letter queue from the subscription's own
// URL (the one OpenSubscriptionURL accepts), as Delivery.DeadLetter and
// the delivery limit name it; each message carries its reason in
// driver.HeaderDeadLetterReason. A URL whose subscription has no
// dead-letter queue is ErrInvalid.
type DeadLetterURLOpener interface {
	OpenDeadLettersURL(ctx context.Context, u *url.URL) (*Subscription, error)
}

// URLMux maps URL schemes to openers. The zero value is ready to use; a
// program that wants no process-wide registry makes its own.
type URLMux struct {
	mu     sync.RWMutex
	topics map[string]TopicURLOpener
	subs   map[string]SubscriptionURLOpener
}

var defaultMux = new(URLMux)

// DefaultURLMux returns the URLMux of OpenTopic, OpenSubscription and
// OpenDeadLetters, on which driver packages register their schemes.
func DefaultURLMux() *URLMux { return defaultMux }

// RegisterTopic registers o for scheme. It panics if scheme is taken.
func (m *URLMux) RegisterTopic(scheme string, o TopicURLOpener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topics == nil {
		m.topics = map[string]TopicURLOpener{}
	}
	if _, dup := m.topics[scheme]; dup {
		panic("wary: topic scheme registered twice: " + scheme)
	}
	m.topics[scheme] = o
}

// RegisterSubscription registers o for scheme. It panics if scheme is
// taken. OpenDeadLetters uses o if it is a DeadLetterURLOpener.
func (m *URLMux) RegisterSubscription(scheme string, o SubscriptionURLOpener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = map[string]SubscriptionURLOpener{}
	}
	if _, dup := m.subs[scheme]; dup {
		panic("wary: subscription scheme registered twice: " + scheme)
	}
	m.subs[scheme] = o
}

// OpenTopic opens the topic the URL names.
func (m *URLMux) OpenTopic(ctx context.Context, urlstr string) (*Topic, error) {
	u, err := parseURL(urlstr)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	o, ok := m.topics[u.Scheme]
	m.mu.RUnlock()
	if !ok {
		return nil, unknownScheme(u.Scheme, m.topicSchemes())
	}
	t, err := o.OpenTopicURL(ctx, u)
	return t, openErr(err)
}

// OpenSubscription opens the subscription the URL names.
func (m *URLMux) OpenSubscription(ctx context.Context, urlstr string) (*Subscription, error) {
	u, o, err := m.subOpener(urlstr)
	if err != nil {
		return nil, err
	}
	s, err := o.OpenSubscriptionURL(ctx, u)
	return s, openErr(err)
}

// subOpener parses urlstr and finds the subscription opener of its scheme.
func (m *URLMux) subOpener(urlstr string) (*url.URL, SubscriptionURLOpener, error) {
	u, err := parseURL(urlstr)
	if err != nil {
		return nil, nil, err
	}
	m.mu.RLock()
	o, ok := m.subs[u.Scheme]
	m.mu.RUnlock()
	if !ok {
		return nil, nil, unknownScheme(u.Scheme, m.subSchemes())
	}
	return u, o, nil
}

// OpenDeadLetters opens the dead letters of the subscription the URL names:
// the consumer's own URL, as given to OpenSubscription, from which the
// driver derives the dead-letter queue. A scheme with no driver is
// ErrInvalid; a driver whose opener is no DeadLetterURLOpener gives
// errors.ErrUnsupported.
func (m *URLMux) OpenDeadLetters(ctx context.Context, urlstr string) (*Subscription, error) {
	u, o, err := m.subOpener(urlstr)
	if err != nil {
		return nil, err
	}
	d, ok := o.(DeadLetterURLOpener)
	if !ok {
		return nil, newError("open", driver.Unknown, false, fmt.Errorf("the driver of scheme %q cannot open dead letters from a subscription URL: %w", u.Scheme, errors.ErrUnsupported))
	}
	s, err := d.OpenDeadLettersURL(ctx, u)
	return s, openErr(err)
}

// openErr makes a driver's classified error (driver.OpenError,
// driver.Invalidf) an *Error of the same class, so that every error of
// opening by URL is one.
func openErr(err error) error {
	var de *driver.Error
	if err == nil || !errors.As(err, &de) || errors.As(err, new(*Error)) {
		return err
	}
	return wrapErr(de.Op, func(error) driver.ErrorInfo { return driver.ErrorInfo{} }, err)
}

func init() {
	seam.Openers = func(m any, urlstr string) (*url.URL, any, any, error) {
		mux := m.(*URLMux)
		u, err := parseURL(urlstr)
		if err != nil {
			return nil, nil, nil, err
		}
		mux.mu.RLock()
		so, sok := mux.subs[u.Scheme]
		to, tok := mux.topics[u.Scheme]
		mux.mu.RUnlock()
		var sub, topic any
		if sok {
			sub = so
		}
		if tok {
			topic = to
		}
		if !sok && !tok {
			return nil, nil, nil, unknownScheme(u.Scheme, mux.subSchemes())
		}
		return u, sub, topic, nil
	}
	seam.Error = func(op string, err error) error {
		if err == nil {
			return nil
		}
		return wrapErr(op, func(error) driver.ErrorInfo { return driver.ErrorInfo{} }, err)
	}
}

func (m *URLMux) topicSchemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var s []string
	for k := range m.topics {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

func (m *URLMux) subSchemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var s []string
	for k := range m.subs {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// OpenTopic opens a topic by URL through DefaultURLMux, for example
// "mem://orders?profile=sqsfifo", once the driver package is imported.
func OpenTopic(ctx context.Context, urlstr string) (*Topic, error) {
	return defaultMux.OpenTopic(ctx, urlstr)
}

// OpenSubscription opens a subscription by URL through DefaultURLMux.
func OpenSubscription(ctx context.Context, urlstr string) (*Subscription, error) {
	return defaultMux.OpenSubscription(ctx, urlstr)
}

// OpenDeadLetters is URLMux.OpenDeadLetters through DefaultURLMux.
func OpenDeadLetters(ctx context.Context, urlstr string) (*Subscription, error) {
	return defaultMux.OpenDeadLetters(ctx, urlstr)
}

func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the URL, and its inner error quotes the part
		// that failed (a port, an escape), which may be a piece of a
		// password: keep only the kind of failure.
		// A URL that does not parse is shown by its scheme alone: where
		// its userinfo ends cannot be told.
		return nil, newError("open", driver.Invalid, false, fmt.Errorf("cannot parse the URL %q: %s", schemeOnly(s), text.URLFailure(err)))
	}
	if u.Scheme == "" {
		// Without a scheme it may be anything, such as a keyword/value
		// connection string: none of it is shown.
		return nil, newError("open", driver.Invalid, false, errors.New(`URL "…" has no scheme`))
	}
	return u, nil
}

// schemeOnly returns what an error may show of a URL that does not parse:
// "amqp://…", "amqp:…", or "…" when s starts with no valid scheme.
func schemeOnly(s string) string {
	m := schemePrefix.FindString(s)
	if m == "" {
		return "…"
	}
	if strings.HasPrefix(s[len(m):], "//") {
		return m + "//…"
	}
	return m + "…"
}

var schemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func unknownScheme(scheme string, known []string) error {
	return newError("open", driver.Invalid, false, fmt.Errorf("no driver registered for scheme %q (registered: %s); import the driver package", scheme, strings.Join(known, ", ")))
}
