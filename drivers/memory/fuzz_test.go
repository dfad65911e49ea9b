package memory_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
)

// FuzzURLOpener: no mem:// URL makes the opener panic; every refusal
// matches ErrInvalid; no error holds a password or a parameter value.
// "SECRET" in the template is replaced by the secret.
func FuzzURLOpener(f *testing.F) {
	for _, s := range []string{
		"mem://t?profile=sqsfifo&limit=3&dedup=1m&maxsize=1024&lock=2s&retention=1h",
		"mem://t/s?profile=partitioned&partitions=3",
		"mem://u:SECRET@t", "mem://:SECRET@t/s",
		"mem://t?colour=SECRET", "mem://t?lock=SECRET", "mem://t?profile=SECRET",
		"mem://t?profile=sqsfifo;limit=SECRET", "mem://t?profile=queue&bogus=%zz&x=SECRET",
		"mem://a/b/c?maxsize=SECRET", "mem://t?profile=partitioned&partitions=SECRET",
		"mem://t?limit=-1&lock=-1s&dedup=-1s&maxsize=-1&x=SECRET", "mem:t?x=SECRET#frag",
	} {
		f.Add(s, "S3cr3tPW", false)
		f.Add(s, "S3cr3tPW", true)
	}
	f.Fuzz(func(t *testing.T, template, secret string, sub bool) {
		open := func(secret string) (*url.URL, error) {
			u, err := url.Parse(strings.ReplaceAll(template, "SECRET", secret))
			if err != nil {
				return nil, nil // the mux refuses it before any opener
			}
			b := memory.New(nil)
			defer b.Close()
			o := &memory.URLOpener{Broker: b}
			if sub {
				s, err := o.OpenSubscriptionURL(context.Background(), u)
				if err == nil {
					s.Close()
				}
				return u, err
			}
			top, err := o.OpenTopicURL(context.Background(), u)
			if err == nil {
				top.Close()
			}
			return u, err
		}
		u, err := open(secret)
		if err == nil {
			return
		}
		if !errors.Is(err, broker.ErrInvalid) {
			t.Fatalf("%s: %v does not match ErrInvalid", u, err)
		}
		if !secretOnlyInValues(u, secret) {
			return
		}
		_, other := open("Zq0000000")
		if strings.Contains(err.Error(), secret) && (other == nil || !strings.Contains(other.Error(), secret)) {
			t.Fatalf("%s: the error shows the password or a parameter value %q: %v", u, secret, err)
		}
	})
}

// secretOnlyInValues reports whether secret, long enough to be told from
// an error's words, lies in u's password, a query value or the fragment,
// and nowhere an error may show (the URL without its password, query and
// fragment; the parameter names).
func secretOnlyInValues(u *url.URL, secret string) bool {
	if len(secret) < 6 || u == nil {
		return false
	}
	bare := *u
	bare.RawQuery, bare.ForceQuery, bare.Fragment, bare.RawFragment = "", false, "", ""
	values := []string{u.Fragment}
	if u.User != nil {
		bare.User = url.User(u.User.Username())
		pw, _ := u.User.Password()
		values = append(values, pw)
	}
	shown := bare.String()
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		shown += " " + k
		if uk, err := url.QueryUnescape(k); err == nil {
			shown += " " + uk
		}
		values = append(values, v)
		if uv, err := url.QueryUnescape(v); err == nil {
			values = append(values, uv)
		}
	}
	if strings.Contains(shown, secret) {
		return false
	}
	for _, v := range values {
		if strings.Contains(v, secret) {
			return true
		}
	}
	return false
}
