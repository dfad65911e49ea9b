package broker

import (
	"strings"
	"testing"
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
				out := RedactString(in)
				for _, s := range tc.secret {
					if strings.Contains(out, s) {
						t.Errorf("RedactString(%q) = %q: still shows %q", in, out, s)
					}
				}
				for _, k := range tc.keep {
					if !strings.Contains(out, k) {
						t.Errorf("RedactString(%q) = %q: lost %q", in, out, k)
					}
				}
			}
		})
	}
}
