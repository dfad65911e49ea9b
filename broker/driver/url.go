package driver

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/broker/internal/text"
	"github.com/wary-go/wary/redact"
)

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
		p.bad = append(p.bad, "the query (malformed: "+text.URLFailure(err)+")")
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
		return invalidf("open", "malformed URL parameter value(s): %s in %s", strings.Join(p.bad, ", "), redact.URL(&bare))
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
	return invalidf("open", "unknown URL parameter(s) %s in %s", strings.Join(unknown, ", "), redact.URL(&bare))
}
