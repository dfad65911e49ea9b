package broker

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/wary-go/wary/redact"
)

// TestRedactStringEveryForm: every connection string form that the clients
// wary drives accept, alone and quoted inside an error message, loses its
// secret and keeps what an operator needs to tell one server from another.
func TestRedactStringEveryForm(t *testing.T) {
	for name, tc := range map[string]struct {
		in     string
		secret []string
		keep   []string
	}{
		"postgres URL": {
			in: "postgres://app:s3cr3t@db.example:5432/shop?sslmode=disable", secret: []string{"s3cr3t"},
			keep: []string{"app", "db.example:5432", "sslmode=disable"},
		},
		"postgres URL, sslpassword in the query": {
			in: "postgresql://app@db/shop?sslpassword=k3y", secret: []string{"k3y"}, keep: []string{"db/shop"},
		},
		"postgres keyword/value": {
			in: "host=127.0.0.1 port=1 user=postgres password=s3cr3t connect_timeout=2", secret: []string{"s3cr3t"},
			keep: []string{"host=127.0.0.1", "port=1", "user=postgres", "connect_timeout=2"},
		},
		"postgres keyword/value, quoted with a space and a quote": {
			in: `host=db password='s3 cr\'3t' user=app`, secret: []string{"s3", "cr", "3t"}, keep: []string{"host=db", "user=app"},
		},
		"postgres keyword/value, spaces around =": {
			in: "host=db password = s3cr3t dbname=shop", secret: []string{"s3cr3t"}, keep: []string{"dbname=shop"},
		},
		"postgres keyword/value, escaped space": {
			in: `password=s3\ cr3t host=db`, secret: []string{"s3", "cr3t"}, keep: []string{"host=db"},
		},
		"postgres keyword/value, ; inside the password": {
			in: "password=ab;cd host=db", secret: []string{"ab", "cd"}, keep: []string{"host=db"},
		},
		"postgres keyword/value, sslpassword": {
			in: "host=db sslpassword=k3y", secret: []string{"k3y"}, keep: []string{"host=db"},
		},
		"mysql DSN": {
			in: "app:s3cr3t@tcp(db.example:3306)/shop?parseTime=true", secret: []string{"s3cr3t"},
			keep: []string{"app", "db.example:3306", "/shop", "parseTime=true"},
		},
		"mysql DSN, @ and : in the password, unix socket": {
			in: "app:s3:cr@3t@unix(/run/mysqld/mysqld.sock)/shop", secret: []string{"s3", "cr", "3t"},
			keep: []string{"app", "/run/mysqld/mysqld.sock", "/shop"},
		},
		"mysql DSN, default address": {
			in: "root:s3cr3t@/test", secret: []string{"s3cr3t"}, keep: []string{"root", "/test"},
		},
		"mysql DSN in an error": {
			in: `open "root:s3cr3t@tcp(127.0.0.1:3306)/test": connection refused`, secret: []string{"s3cr3t"},
			keep: []string{"root", "127.0.0.1:3306", "connection refused"},
		},
		"amqp URL": {
			in: "amqp://guest:s3cr3t@127.0.0.1:5672/vhost", secret: []string{"s3cr3t"}, keep: []string{"guest", "127.0.0.1:5672"},
		},
		"amqp URL, unescaped / in the password": {
			in: "amqp://guest:s3/cr3t@127.0.0.1:5672/", secret: []string{"s3", "cr3t"}, keep: []string{"127.0.0.1:5672"},
		},
		"service bus connection string": {
			in:     "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=AbC+dE/f=;EntityPath=orders",
			secret: []string{"AbC+dE/f="}, keep: []string{"ns.servicebus.windows.net", "RootManageSharedAccessKey", "EntityPath=orders"},
		},
		"service bus emulator connection string": {
			in:     "Endpoint=sb://127.0.0.1:5673;SharedAccessKeyName=k;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;",
			secret: []string{"SAS_KEY_VALUE"}, keep: []string{"127.0.0.1:5673", "UseDevelopmentEmulator=true"},
		},
		"service bus connection string, white space in an unquoted key": {
			in:     "Endpoint=sb://ns/;SharedAccessKeyName=root;SharedAccessKey=ab cd;EntityPath=orders",
			secret: []string{"ab", "cd"}, keep: []string{"Endpoint=sb://ns/", "EntityPath=orders"},
		},
		"postgres keyword/value, unquoted white space in the password": {
			in: "host=db password=s3 cr3t", secret: []string{"s3", "cr3t"}, keep: []string{"host=db"},
		},
		"service bus shared access signature": {
			in: "Endpoint=sb://ns/;SharedAccessSignature=SharedAccessSignature sr=x&sig=s1gn&se=1", secret: []string{"s1gn"},
			keep: []string{"Endpoint=sb://ns/"},
		},
		"AWS keys as keyword/value": {
			in: "aws_access_key_id=AKIAEXAMPLE aws_secret_access_key=wJalrXUtnFEMI aws_session_token=T0K", secret: []string{"AKIAEXAMPLE", "wJalrXUtnFEMI", "T0K"},
		},
		"URL with secret query parameters": {
			in: "sqsfifo://orders.fifo?endpoint=http://127.0.0.1:9324&secret_key=wJalr&token=T0K", secret: []string{"wJalr", "T0K"},
			keep: []string{"orders.fifo"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			for _, in := range []string{
				tc.in,
				"wary: PostgreSQL " + tc.in + ": dial tcp 127.0.0.1:1: connect: connection refused",
				"cannot parse `" + tc.in + "`: failed to connect",
				`open "` + tc.in + `" (exit 2)`,
			} {
				out := redact.String(in)
				for _, s := range tc.secret {
					if strings.Contains(out, s) {
						t.Errorf("redact.String(%q) = %q: still shows %q", in, out, s)
					}
				}
				for _, k := range tc.keep {
					if !strings.Contains(out, k) {
						t.Errorf("redact.String(%q) = %q: lost %q", in, out, k)
					}
				}
			}
		})
	}
}

// secretShapes embed a password, as written, in the URL and connection
// string shapes an operator may give: URLs whose userinfo holds white
// space or quotes (which do not parse), without a scheme or with one that
// is not valid, opaque, escaped, in a query; PostgreSQL keyword/value
// strings; Service Bus connection strings.
var secretShapes = []func(pw string) string{
	func(pw string) string { return "amqp://guest:" + pw + "@127.0.0.1:1/" },
	func(pw string) string { return "postgres://postgres:" + pw + "@127.0.0.1:1/test?sslmode=disable" },
	func(pw string) string { return "://guest:" + pw + "@h/" },
	func(pw string) string { return "//guest:" + pw + "@h/" },
	func(pw string) string { return "x_y://guest:" + pw + "@h:1/v" },
	func(pw string) string { return "1amqp://guest:" + pw + "@h/" },
	func(pw string) string { return "amqp://:" + pw + "@h/" },
	func(pw string) string { return `amqp://guest:"` + pw + `"@h/` },
	func(pw string) string { return "amqp://guest:'" + pw + "'@h/" },
	func(pw string) string { return "amqp:guest:" + pw + "@h" },
	func(pw string) string { return "amqps://guest:" + url.PathEscape(pw) + "@h:5671/v?heartbeat=5" },
	func(pw string) string { return "mem://h/?password=" + url.QueryEscape(pw) + "&x=1" },
	func(pw string) string { return "rabbit://q?x=1#" + url.PathEscape(pw) },
	func(pw string) string {
		return "host=127.0.0.1 port=1 user=postgres password='" +
			strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "' dbname=test"
	},
	func(pw string) string {
		return "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=" + pw + ";EntityPath=q"
	},
	func(pw string) string {
		return "Endpoint=sb://ns/;SharedAccessSignature=SharedAccessSignature sr=x&sig=" + url.QueryEscape(pw) + "&se=1"
	},
}

// inText quotes s as the errors of the clients wary drives do.
func inText(s string) []string {
	return []string{s, "wary: PostgreSQL " + s + ": dial tcp 127.0.0.1:1: connect: connection refused",
		"cannot parse `" + s + "`: failed to parse as URL", `open "` + s + `" (exit 2)`}
}

// openErrors opens s as a topic, a subscription and dead letters, and
// returns the errors' texts.
func openErrors(s string) string {
	var b strings.Builder
	ctx := context.Background()
	if _, err := OpenTopic(ctx, s); err != nil {
		b.WriteString(err.Error() + "\n")
	}
	if _, err := OpenSubscription(ctx, s); err != nil {
		b.WriteString(err.Error() + "\n")
	}
	if _, err := OpenDeadLetters(ctx, s); err != nil {
		b.WriteString(err.Error() + "\n")
	}
	return b.String()
}

// TestRedactUnparsableURLs: a password with white space or a quote, or in
// a URL without a valid scheme, is hidden like any other, and an error
// about a URL that does not parse shows its scheme alone (issue 43).
func TestRedactUnparsableURLs(t *testing.T) {
	for _, c := range []struct{ in, keep string }{
		{"amqp://guest:S3cr3tPW x@127.0.0.1:1/", "127.0.0.1:1"},
		{"://guest:S3cr3tPW@h/", "@h/"},
		{"postgres://postgres:S3cr3tPW x@127.0.0.1:1/test", "127.0.0.1:1/test"},
		{`amqp://guest:S3cr"3tPW@h/`, "@h/"},
		{"amqp://guest:'S3cr3tPW x'@h/", "@h/"},
		{"x_y://guest:S3cr3tPW z@h/", "@h/"},
		{"//guest:S3cr3tPW x@h/", "@h/"},
		{"amqp:guest:S3cr3tPW x@h", "@h"},
		{"amqp://guest:S3cr3tPW\n x@h/", "@h/"},
		{"amqp://guest:S3cr://3tPW x@h/", "@h/"},
		{"amqp://guest:S3cr#3t PW@h/", "amqp://"},
	} {
		for _, in := range inText(c.in) {
			out := redact.String(in)
			if hasSecret(out) {
				t.Errorf("redact.String(%q) = %q", in, out)
			}
			if !strings.Contains(out, c.keep) {
				t.Errorf("redact.String(%q) = %q: lost %q", in, out, c.keep)
			}
		}
		if msg := openErrors(c.in); hasSecret(msg) {
			t.Errorf("opening %q: %s", c.in, msg)
		}
	}
	_, err := OpenTopic(context.Background(), "amqp://guest:S3cr3tPW x@127.0.0.1:1/")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"amqp://…"`) || strings.Contains(err.Error(), "guest") {
		t.Errorf("OpenTopic: %v, want ErrInvalid showing the scheme alone", err)
	}
	_, err = OpenTopic(context.Background(), "host=h password=S3cr3tPW")
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "host") {
		t.Errorf("OpenTopic of a keyword/value string: %v, want ErrInvalid showing none of it", err)
	}
}

// FuzzRedactShapes: whatever the password, no shape of secretShapes, alone
// or quoted in an error, shows it through redact.String, and no open error
// shows it.
func FuzzRedactShapes(f *testing.F) {
	for i := range secretShapes {
		for _, pw := range []string{"S3cr3tPW", "S3cr3tPW x", `S3"cr'3t`, "S3cr@3t/PW?#", "p w://x@y", "S3\ncr3t", "S3;cr3t=x"} {
			f.Add(uint8(i), pw)
		}
	}
	f.Fuzz(func(t *testing.T, shape uint8, pw string) {
		if len(pw) < 6 {
			return // too short to tell from the rest of the text
		}
		build := secretShapes[int(shape)%len(secretShapes)]
		if strings.Contains(build("x"), "SharedAccessKey=x;") &&
			(strings.Contains(pw, ";") || strings.ContainsAny(pw, " \t\n\r\v\f") && strings.Contains(pw, "=")) {
			return // ";" ends a Service Bus value, and " name=" starts the next one
		}
		if strings.TrimLeft(pw, " \t") != pw {
			return // blanks after "=" are not part of a keyword's value (libpq)
		}
		// The password may occur in the rest of the output by chance (a
		// host, an error's words, "xxxxx"): that is no leak. A leak is an
		// output that holds it under this password and not under another.
		has := func(out string) bool { return strings.Contains(out, pw) }
		for i, in := range inText(build(pw)) {
			other := inText(build("Zq0000000"))[i]
			if out := redact.String(in); has(out) && !has(redact.String(other)) {
				t.Fatalf("redact.String(%q) = %q", in, out)
			}
		}
		if msg := openErrors(build(pw)); has(msg) && !has(openErrors(build("Zq0000000"))) {
			t.Fatalf("opening %q: %s", build(pw), msg)
		}
	})
}
