package broker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/broker/driver"
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
// names. A driver's SubscriptionURLOpener implements it when the driver
// can find a subscription's dead-letter queue from the subscription's own
// URL; URLMux.OpenDeadLetters finds it on the opener registered with
// RegisterSubscription, so a scheme needs no second registration, and an
// opener cannot support dead letters for a scheme it does not open
// subscriptions of.
//
// OpenDeadLettersURL receives the URL of the consumer's subscription (the
// one OpenSubscriptionURL accepts, with the same parameters), not the
// dead-letter queue's: the driver derives the queue as its own
// Delivery.DeadLetter and delivery limit name it. The subscription it
// returns reads that queue, and each delivery's message carries its reason
// in the header HeaderDeadLetterReason. Errors match the classes of this
// package as OpenSubscriptionURL's do; a URL whose subscription has no
// dead-letter queue is ErrInvalid.
type DeadLetterURLOpener interface {
	OpenDeadLettersURL(ctx context.Context, u *url.URL) (*Subscription, error)
}

// URLMux maps URL schemes to openers. The zero value is ready to use.
// Programs that want no process-wide registry create their own URLMux and
// register openers on it explicitly; nothing requires the default one.
type URLMux struct {
	mu     sync.RWMutex
	topics map[string]TopicURLOpener
	subs   map[string]SubscriptionURLOpener
}

var defaultMux = new(URLMux)

// DefaultURLMux returns the URLMux that OpenTopic, OpenSubscription and
// OpenDeadLetters use, on which driver packages register their schemes
// when imported.
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

// RegisterSubscription registers o for scheme. It panics if scheme is taken.
// If o also implements DeadLetterURLOpener, OpenDeadLetters uses it for
// scheme.
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
	return o.OpenTopicURL(ctx, u)
}

// OpenSubscription opens the subscription the URL names.
func (m *URLMux) OpenSubscription(ctx context.Context, urlstr string) (*Subscription, error) {
	u, o, err := m.subOpener(urlstr)
	if err != nil {
		return nil, err
	}
	return o.OpenSubscriptionURL(ctx, u)
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

// OpenDeadLetters opens the dead letters of the subscription the URL
// names. The URL is the consumer's own subscription URL, as given to
// OpenSubscription (for example "mem://orders/billing" or
// "rabbit://orders.billing?dead_letter_exchange=orders.billing.dlx"), not
// the dead-letter queue's: the driver derives the queue from it (see each
// driver's OpenDeadLettersURL). Every delivery of the subscription
// returned carries its dead-letter reason in the header
// HeaderDeadLetterReason.
//
// A scheme with no registered driver is ErrInvalid; a driver whose opener
// does not implement DeadLetterURLOpener gives an error matching
// ErrUnsupported.
func (m *URLMux) OpenDeadLetters(ctx context.Context, urlstr string) (*Subscription, error) {
	u, o, err := m.subOpener(urlstr)
	if err != nil {
		return nil, err
	}
	d, ok := o.(DeadLetterURLOpener)
	if !ok {
		return nil, newError("open", driver.Unknown, false, fmt.Errorf("the driver of scheme %q cannot open dead letters from a subscription URL: %w", u.Scheme, ErrUnsupported))
	}
	return d.OpenDeadLettersURL(ctx, u)
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
// "mem://orders?profile=sqsfifo". Import the driver package (for its side
// effect, if nothing else) to register its scheme.
func OpenTopic(ctx context.Context, urlstr string) (*Topic, error) {
	return defaultMux.OpenTopic(ctx, urlstr)
}

// OpenSubscription opens a subscription by URL through DefaultURLMux.
func OpenSubscription(ctx context.Context, urlstr string) (*Subscription, error) {
	return defaultMux.OpenSubscription(ctx, urlstr)
}

// OpenDeadLetters opens, through DefaultURLMux, the dead letters of the
// subscription that the URL names (the consumer's own subscription URL);
// see URLMux.OpenDeadLetters.
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
		return nil, newError("open", driver.Invalid, false, fmt.Errorf("cannot parse the URL %q: %s", schemeOnly(s), parseFailure(err)))
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

// parseFailure is url.Parse's error without the text it quotes.
func parseFailure(err error) string {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return quoted.ReplaceAllString(err.Error(), `"…"`)
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

func unknownScheme(scheme string, known []string) error {
	return newError("open", driver.Invalid, false, fmt.Errorf("no driver registered for scheme %q (registered: %s); import the driver package", scheme, strings.Join(known, ", ")))
}

// URLParams reads a URL's query parameters for an opener and rejects any
// the opener did not ask about, as every opener must.
//
// The typed getters (Int, Duration, Bool) record a malformed value instead
// of returning it; Done then reports it as ErrInvalid, naming the
// parameter but never echoing its value (a password pasted into the wrong
// parameter must not reach a log).
type URLParams struct {
	u    *url.URL
	q    url.Values
	used map[string]bool
	bad  []string // "name (want ...)" for malformed values
}

// NewURLParams starts reading u's query. A query that does not parse as
// a whole (a malformed escape, a ";" separator) is reported by Done as
// ErrInvalid: a parameter is never dropped without a word.
func NewURLParams(u *url.URL) *URLParams {
	q, err := url.ParseQuery(u.RawQuery)
	p := &URLParams{u: u, q: q, used: map[string]bool{}}
	if err != nil {
		p.bad = append(p.bad, "the query (malformed: "+parseFailure(err)+")")
	}
	return p
}

// NoUserinfo records, for Done, that u carries a user or password that
// the opener does not use; an opener whose scheme takes no credentials
// calls it, so that they are not ignored without a word.
func (p *URLParams) NoUserinfo() {
	if p.u.User != nil {
		p.bad = append(p.bad, "userinfo (this scheme takes no user or password in the URL)")
	}
}

// Get returns the parameter's value ("" when absent) and marks it known.
func (p *URLParams) Get(name string) string {
	p.used[name] = true
	return p.q.Get(name)
}

// Has reports whether the parameter is present, and marks it known.
func (p *URLParams) Has(name string) bool {
	p.used[name] = true
	_, ok := p.q[name]
	return ok
}

// Int returns the parameter as a decimal integer, def when absent. A value
// that is not one, or lies outside [lo, hi], is reported by Done.
func (p *URLParams) Int(name string, def, lo, hi int) int {
	if !p.Has(name) {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(p.q.Get(name)))
	if err != nil || n < lo || n > hi {
		p.bad = append(p.bad, fmt.Sprintf("%s (want an integer from %d to %d)", name, lo, hi))
		return def
	}
	return n
}

// Duration returns the parameter as a Go duration ("30s", "5m"), def when
// absent. A value that is not one, or lies outside [lo, hi], is reported
// by Done.
func (p *URLParams) Duration(name string, def, lo, hi time.Duration) time.Duration {
	if !p.Has(name) {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(p.q.Get(name)))
	if err != nil || d < lo || d > hi {
		p.bad = append(p.bad, fmt.Sprintf("%s (want a duration from %s to %s)", name, lo, hi))
		return def
	}
	return d
}

// Bool returns the parameter as a boolean (1, t, true, 0, f, false; an
// empty value, as in "?ordered", is true), def when absent. Another value
// is reported by Done.
func (p *URLParams) Bool(name string, def bool) bool {
	if !p.Has(name) {
		return def
	}
	v := strings.TrimSpace(p.q.Get(name))
	if v == "" {
		return true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.bad = append(p.bad, name+" (want true or false)")
		return def
	}
	return b
}

// Done returns an error matching ErrInvalid naming every parameter that no
// Get or Has asked for, and every value a typed getter could not read.
func (p *URLParams) Done() error {
	if len(p.bad) > 0 {
		bare := *p.u // the query would echo the values
		bare.RawQuery, bare.ForceQuery = "", false
		return newError("open", driver.Invalid, false, fmt.Errorf("malformed URL parameter value(s): %s in %s", strings.Join(p.bad, ", "), Redact(&bare)))
	}
	var unknown []string
	for k := range p.q {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	bare := *p.u // the query would echo the values
	bare.RawQuery, bare.ForceQuery = "", false
	return newError("open", driver.Invalid, false, fmt.Errorf("unknown URL parameter(s) %s in %s", strings.Join(unknown, ", "), Redact(&bare)))
}

// Invalidf returns an error matching ErrInvalid, for openers and drivers
// that reject a configuration.
func Invalidf(format string, args ...any) error {
	return newError("open", driver.Invalid, false, fmt.Errorf(format, args...))
}
