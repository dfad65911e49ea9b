package broker

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/redact"
)

// secretURLs hold the secret "S3cr3tPW" (or a piece of it) in every place
// a URL can carry one.
var secretURLs = []string{
	"amqp://guest:S3cr3tPW@host:5672/vhost",
	"amqp://guest:S3cr/3tPW@h/",             // password with "/": a parse error quoting ":S3cr"
	"amqp://guest:1234/S3cr3tPW@host:5672/", // "1234" read as a port, the rest as a path
	"amqp://guest:S3cr3tPW@h:notaport/",
	"amqp:guest:S3cr3tPW@host",
	"amqp://h/?password=S3cr3tPW",
	"amqp://h/?pass=S3cr3tPW&x=1",
	"amqp://h/?pwd=S3cr3tPW",
	"amqp://h/?passwd=S3cr3tPW",
	"amqp://h/?auth=S3cr3tPW",
	"amqp://h/?credentials=S3cr3tPW",
	"amqp://h/?sig=S3cr3tPW",
	"amqp://h/?sas=S3cr3tPW",
	"amqp://h/?SharedAccessKey=S3cr3tPW&SharedAccessKeyName=root",
	"amqp://h/?api_token=S3cr3tPW",
	"amqp://h/?password=S3cr3tPW%zz",
	"amqp://h/?passw%zzord=S3cr3tPW",
	"amqp://h/?x=1;password=S3cr3tPW",
	"amqp://h/#S3cr3tPW",
	"amqp://h/?a=1#S3cr3tPW",
	"amqp://guest:S3cr3tPW@h:5672/?x=%zz",
	"amqp://guest:S3cr3tPW@[::1/",
	"amqp://guest:S3cr3tPW\x7f@host/",
	"amqps://u:S3cr3tPW?w#x@h/v",
	"amqp:0:S3cr3tPW?x=%zz",
	"rabbit://?:S3cr3tPW@h?0",
	"amqp://u:S3cr#3tPW@h/",
	"mem://h@?%0#@S3cr3tPW",
	"mem:x@?%0#@S3cr3tPW",
	"amqp:guest:@S3c?r3tPW@h", // opaque, the password running into the query
	"amqp:guest:S3cr3tPW#0://@h",
}

func hasSecret(s string) bool {
	return strings.Contains(s, "S3cr") || strings.Contains(s, "3tPW")
}

func TestRedactHidesEverySecret(t *testing.T) {
	for _, raw := range secretURLs {
		if got := redact.String(raw); hasSecret(got) {
			t.Errorf("redact.String(%q) = %q", raw, got)
		}
		if u, err := url.Parse(raw); err == nil {
			if got := redact.URL(u); hasSecret(got) {
				t.Errorf("redact.URL(%q) = %q", raw, got)
			}
		}
		for _, open := range []func() error{
			func() error { _, err := OpenTopic(context.Background(), raw); return err },
			func() error { _, err := OpenSubscription(context.Background(), raw); return err },
		} {
			err := open()
			if err == nil {
				t.Errorf("open %q: no error", raw)
				continue
			}
			if hasSecret(err.Error()) {
				t.Errorf("open %q: error %q holds the secret", raw, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("open %q: %v is not ErrInvalid", raw, err)
			}
		}
	}
}

func TestRedactKeepsWhatIsNotSecret(t *testing.T) {
	u, _ := url.Parse("amqp://guest:pw@host:5672/vhost?exchange=orders&assigned=0,1&SharedAccessKeyName=root")
	got := redact.URL(u)
	for _, keep := range []string{"guest", "host:5672", "/vhost", "exchange=orders", "assigned=0,1", "SharedAccessKeyName=root"} {
		if !strings.Contains(got, keep) {
			t.Errorf("Redact = %q lost %q", got, keep)
		}
	}
}

func TestURLParamsMalformedQuery(t *testing.T) {
	for _, raw := range []string{"mem://t?profile=sqsfifo;limit=3", "mem://t?profile=queue&bogus=%zz"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		p := driver.NewURLParams(u)
		_ = p.Get("profile")
		_ = p.Get("limit")
		_ = p.Get("bogus")
		if err := p.Done(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Done = %v, want ErrInvalid for the malformed query", raw, err)
		}
	}
	u, _ := url.Parse("mem://user:pw@t")
	p := driver.NewURLParams(u)
	p.NoUserinfo()
	if err := p.Done(); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "pw") {
		t.Errorf("userinfo on a scheme without credentials: %v", err)
	}
}

// FuzzRedact: no input makes redact.URL, redact.String or an opener's error
// show a password that the URL carries.
func FuzzRedact(f *testing.F) {
	for _, s := range secretURLs {
		f.Add(strings.ReplaceAll(s, "S3cr3tPW", "pw"), "S3cr3tPW")
	}
	f.Add("kafka://a/b?brokers=h:9092", "zz9Qsecret")
	f.Fuzz(func(t *testing.T, template, secret string) {
		if len(secret) < 6 || strings.ContainsAny(secret, "%") {
			return
		}
		// The secret may occur in the rest of the output by chance (the
		// host, an error's words): that is no leak. A leak is an output
		// that holds it under this password and not under another.
		shows := func(password string) (redacted, openErr bool) {
			raw := "amqp://u:" + url.PathEscape(password) + "@" + template
			has := func(s string) bool {
				return strings.Contains(s, secret) || strings.Contains(s, url.PathEscape(secret))
			}
			_, err := OpenTopic(context.Background(), raw)
			return has(redact.String(raw)), err != nil && has(err.Error())
		}
		r1, e1 := shows(secret)
		r2, e2 := shows("Zq0000000")
		if r1 && !r2 {
			t.Fatalf("redact.String shows the password %q of %q", secret, template)
		}
		if e1 && !e2 {
			t.Fatalf("an open error shows the password %q of %q", secret, template)
		}
	})
}

func TestUnknownParameterErrorShowsNoValue(t *testing.T) {
	u, _ := url.Parse("mem://x?colour=S3cr3tPW")
	err := driver.NewURLParams(u).Done()
	if !errors.Is(err, ErrInvalid) || hasSecret(err.Error()) || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("Done = %v", err)
	}
}

// subOpener opens nothing; it records the URL it was given.
type subOpener struct{ got *url.URL }

func (o *subOpener) OpenSubscriptionURL(_ context.Context, u *url.URL) (*Subscription, error) {
	return nil, errors.New("not a subscription opener in this test")
}

// deadOpener also opens dead letters.
type deadOpener struct{ subOpener }

func (o *deadOpener) OpenDeadLettersURL(_ context.Context, u *url.URL) (*Subscription, error) {
	o.got = u
	return nil, nil
}

// TestOpenDeadLetters: the mux hands the consumer's subscription URL, as
// given, to the opener registered for its scheme; a scheme without
// DeadLetterURLOpener is errors.ErrUnsupported, an unknown one ErrInvalid.
func TestOpenDeadLetters(t *testing.T) {
	var m URLMux
	dead, plain := &deadOpener{}, &subOpener{}
	m.RegisterSubscription("dead", dead)
	m.RegisterSubscription("plain", plain)
	ctx := context.Background()

	if _, err := m.OpenDeadLetters(ctx, "dead://orders/billing?limit=3"); err != nil {
		t.Fatalf("OpenDeadLetters: %v", err)
	}
	if dead.got == nil || dead.got.String() != "dead://orders/billing?limit=3" {
		t.Fatalf("the opener got %v, want the subscription URL as given", dead.got)
	}

	_, err := m.OpenDeadLetters(ctx, "plain://orders/billing")
	if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"plain"`) {
		t.Errorf("scheme without DeadLetterURLOpener: %v, want errors.ErrUnsupported naming the scheme", err)
	}
	var be *Error
	if !errors.As(err, &be) || be.Op != "open" {
		t.Errorf("scheme without DeadLetterURLOpener: %#v is not an *Error of op open", err)
	}

	_, err = m.OpenDeadLetters(ctx, "nosuch://orders/billing")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), "dead, plain") {
		t.Errorf("unknown scheme: %v, want ErrInvalid naming it and the registered schemes", err)
	}

	for _, raw := range secretURLs {
		_, err := m.OpenDeadLetters(ctx, raw)
		if err == nil || hasSecret(err.Error()) || !errors.Is(err, ErrInvalid) {
			t.Errorf("OpenDeadLetters(%q) = %v, want ErrInvalid without the secret", raw, err)
		}
	}
}

// TestOpenDeadLettersDefaultMux: the package-level function uses the
// default mux, which reports an unknown scheme as its OpenSubscription does.
func TestOpenDeadLettersDefaultMux(t *testing.T) {
	_, err := OpenDeadLetters(context.Background(), "nosuch://t/s")
	_, want := OpenSubscription(context.Background(), "nosuch://t/s")
	if !errors.Is(err, ErrInvalid) || err.Error() != want.Error() {
		t.Errorf("OpenDeadLetters = %v, want %v", err, want)
	}
}
