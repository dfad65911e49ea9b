package kafka_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// FuzzURLOpener: no kafka:// URL makes the openers panic; every refusal
// matches ErrInvalid (the context is cancelled, so that nothing waits for
// a broker: a URL that passes the checks fails with context.Canceled); no
// error holds a password or a parameter value. "SECRET" in the template
// is replaced by the secret.
func FuzzURLOpener(f *testing.F) {
	f.Setenv("KAFKA_BROKERS", "")
	for _, s := range []string{
		"kafka://orders?brokers=127.0.0.1:1&skip_check=true",
		"kafka://g?topic=t&brokers=127.0.0.1:1,127.0.0.1:2&ordered=true&dead_letter_topic=d&delivery_limit=3&commit_interval=1s&skip_check=1",
		"kafka://g?topic=t&brokers=127.0.0.1:1&retry_topic=r&dead_letter_topic=d",
		"kafka://a/b?brokers=127.0.0.1:1", "kafka://u:SECRET@t?brokers=127.0.0.1:1", "kafka://:SECRET@g?topic=t&brokers=h:1",
		"kafka://t?brokers=127.0.0.1:1&colour=SECRET", "kafka://t?brokers=SECRET", "kafka://t?brokers=h:1&skip_check=SECRET",
		"kafka://g?topic=SECRET/x&brokers=h:1", "kafka://g?topic=t&brokers=h:1&delivery_limit=SECRET",
		"kafka://g?topic=t&brokers=h:1;retry_topic=SECRET", "kafka://g?topic=t&brokers=h:1&bogus=%zz&x=SECRET",
		"kafka://g?topic=t&brokers=h:1&retry_topic=t", "kafka:t?brokers=h:1&x=SECRET#frag", "kafka://t#SECRET",
	} {
		f.Add(s, "S3cr3tPW", false)
		f.Add(s, "S3cr3tPW", true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := new(kafka.URLOpener)
	f.Fuzz(func(t *testing.T, template, secret string, sub bool) {
		kinds := []string{"topic"}
		if sub {
			kinds = []string{"subscription", "dead letters"}
		}
		for _, kind := range kinds {
			checkURLOpener(t, ctx, o, kind, template, secret)
		}
	})
}

// checkURLOpener opens the fuzzed URL as kind (topic, subscription or
// dead letters) and checks FuzzURLOpener's promises.
func checkURLOpener(t *testing.T, ctx context.Context, o *kafka.URLOpener, kind, template, secret string) {
	open := func(secret string) (*url.URL, error) {
		u, err := url.Parse(strings.ReplaceAll(template, "SECRET", secret))
		if err != nil {
			return nil, nil // the mux refuses it before any opener
		}
		switch kind {
		case "subscription", "dead letters":
			openURL := o.OpenSubscriptionURL
			if kind == "dead letters" {
				openURL = o.OpenDeadLettersURL
			}
			s, err := openURL(ctx, u)
			if err == nil {
				s.Close()
			}
			return u, err
		}
		top, err := o.OpenTopicURL(ctx, u)
		if err == nil {
			top.Close()
		}
		return u, err
	}
	u, err := open(secret)
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("%s %s: %v does not match ErrInvalid", kind, u, err)
	}
	if !secretOnlyInValues(u, secret) {
		return
	}
	_, other := open("Zq0000000")
	if strings.Contains(err.Error(), secret) && (other == nil || !strings.Contains(other.Error(), secret)) {
		t.Fatalf("%s %s: the error shows the password or a parameter value %q: %v", kind, u, secret, err)
	}
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
