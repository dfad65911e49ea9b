package rabbit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
)

// headerValue turns a fuzzed kind and number into one of the Go types
// amqp091-go decodes header values to, so that the fuzzer reaches every
// branch of the mapping with spoofed counts, keys and reasons.
func headerValue(kind uint8, n int64, s string) any {
	switch kind % 14 {
	case 0:
		return nil
	case 1:
		return s
	case 2:
		return int8(n)
	case 3:
		return int16(n)
	case 4:
		return int32(n)
	case 5:
		return n
	case 6:
		return uint8(n)
	case 7:
		return uint16(n)
	case 8:
		return uint32(n)
	case 9:
		return float64(n)
	case 10:
		return []byte(s)
	case 11:
		return amqp.Table{"reason": s, "queue": s, "count": n}
	case 12:
		return []any{amqp.Table{"reason": s, "queue": s}, s, n}
	default:
		return time.Unix(n%(1<<33), 0)
	}
}

// FuzzMessageFromDelivery maps fuzzed deliveries (header tables with
// spoofed wary- and x- headers of every value type, any exchange and
// routing key) to messages: it never panics, never trusts a header a
// producer could forge on a path where the driver does not trust it, keeps
// Attempt within bounds, and round-trips the headers and key of a valid
// message published by the driver.
func FuzzMessageFromDelivery(f *testing.F) {
	f.Add("m1", "orders", "0", false, uint8(1), "customer-1", uint8(5), int64(3), uint8(5), int64(2), "delivery_limit", "orders.0", "h", "v", uint8(2), uint8(0), "orders.0", "orders.dlx")
	f.Add("m2", "", "orders", true, uint8(1), "k", uint8(4), int64(math.MaxInt64), uint8(5), int64(math.MinInt64), "expired", "orders.delay.100ms", "traceparent", "00-ab", uint8(0), uint8(0), "orders", "")
	f.Add("m3", "orders.dlx", "3", true, uint8(10), "\xff", uint8(8), int64(-1), uint8(1), int64(9), "rejected", "orders", "wary-aggregate-id", "a-1", uint8(0), uint8(0), "orders.dlq", "orders.dlx")
	f.Add("", "x", "", false, uint8(12), "", uint8(11), int64(0), uint8(6), int64(255), "", "", "x-death", "", uint8(4), uint8(3), "q.3", "")
	f.Fuzz(func(t *testing.T, id, exchange, rk string, redelivered bool, keyKind uint8, key string,
		priorKind uint8, prior int64, countKind uint8, count int64, reason, deathQueue, hname, hval string,
		partitions, part uint8, queue, dlx string) {
		o := origin{queue: queue, deadLettersFrom: dlx}
		if partitions > 1 {
			o.partitions, o.partition = int(partitions), int(part)%int(partitions)
		}
		h := amqp.Table{
			hdrKey:                 headerValue(keyKind, prior, key),
			hdrPrior:               headerValue(priorKind, prior, reason),
			"x-delivery-count":     headerValue(countKind, count, reason),
			"x-death":              []any{amqp.Table{"reason": reason, "queue": deathQueue}},
			"x-first-death-reason": reason,
			hdrReason:              reason,
			"wary-not-before":      "9223372036854775807",
		}
		if hname != "" {
			h[hname] = hval
		}
		d := &amqp.Delivery{MessageId: id, Exchange: exchange, RoutingKey: rk, Redelivered: redelivered, Headers: h}
		m, p := fromDelivery(d, o)
		if m.Attempt < 1 || m.Attempt > 2*maxCount+1 || p < 0 || p > maxCount {
			t.Fatalf("attempt %d prior %d out of bounds", m.Attempt, p)
		}
		ladder := exchange == "" && rk == queue && queue != ""
		viaDLX := dlx != "" && exchange == dlx
		if !redelivered && !ladder && !viaDLX && m.Attempt != 1 {
			t.Fatalf("a first delivery by an untrusted path has attempt %d", m.Attempt)
		}
		if redelivered && !ladder && !viaDLX && m.Attempt > maxCount+1 {
			t.Fatalf("a redelivery has attempt %d", m.Attempt)
		}
		for k := range m.Headers.All() {
			if k == hdrReason {
				if !viaDLX {
					t.Fatalf("reason %q reported on a message that did not come through the dead-letter exchange", m.Headers.Get(k))
				}
				continue
			}
			if isBrokerHeader(k) {
				t.Fatalf("header %q passed through", k)
			}
		}
		if o.partitions > 1 && m.Key != "" && partition(&driver.Message{Key: m.Key}, o.partitions) != o.partition {
			t.Fatalf("key %q is not of partition %d", m.Key, o.partition)
		}
		if !utf8.ValidString(m.Key) {
			t.Fatalf("key %q is not UTF-8", m.Key)
		}

		// Round trip of a valid message published by the driver.
		if !utf8.ValidString(hname) || !utf8.ValidString(hval) || !utf8.ValidString(key) || len(hname) > maxShortStr ||
			hname == "" || isBrokerHeader(hname) || hname == hdrReason {
			return
		}
		in := &driver.Message{ID: id, Key: key, Headers: broker.Headers{{hname, hval}}, Body: []byte(reason)}
		if checkMessage(in, key) != nil {
			return
		}
		for _, n := range []int{0, 4} {
			tp := &topic{partitions: n}
			route, inHeader := tp.route(in)
			pub := toPublishing(in, inHeader)
			q := "q"
			org := origin{queue: q}
			if n > 1 {
				q = "q." + route
				org = origin{queue: q, partitions: n, partition: partition(in, n)}
			}
			got, _ := fromDelivery(&amqp.Delivery{MessageId: pub.MessageId, Exchange: "t", RoutingKey: route, Headers: pub.Headers, Body: pub.Body}, org)
			if got.ID != in.ID || got.Key != in.Key || len(got.Headers) != 1 || got.Headers.Get(hname) != hval || string(got.Body) != reason || got.Attempt != 1 {
				t.Fatalf("partitions %d: round trip %+v, want %+v", n, got, in)
			}
			if _, ok := contentHeaderSize(&pub); !ok {
				t.Fatalf("a valid message is not encodable")
			}
		}
	})
}

// errNoNet is what the fuzzed openers' dialer returns: they never reach
// the network.
var errNoNet = errors.New("fuzz: no network")

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// FuzzURLOpener opens fuzzed rabbit:// and amqp:// URLs, whose password is
// marked, with Dial and the package's URLOpener, through a dialer that
// always fails: it never panics, every error is ErrInvalid (or the
// dialer's own), and no error shows the password or a piece of it that
// holds the mark.
func FuzzURLOpener(f *testing.F) {
	f.Add(uint8(0), "guest", "pw", "127.0.0.1:5672", "/", "exchange=orders")
	f.Add(uint8(0), "guest", "S3cr/3tPW", "h", "/", "")
	f.Add(uint8(0), "guest", "1234/S3cr3tPW", "h", "/vhost", "queue=q")
	f.Add(uint8(1), "guest", "pw", "h", "", "")
	f.Add(uint8(2), "", "pw", "orders", "", "partitions=4&assigned=0,1")
	f.Add(uint8(3), "u", "p?w#x", "h:99999", "/v", "queue=q&prefetch=lots&lock=S3cr3tPW")
	f.Add(uint8(0), "u", "pw%zz", "h", "/", "bogus=%zz;x=1")
	f.Add(uint8(4), "u", "pw", "h", "/", "heartbeat=-1&channel_max=70000")
	f.Fuzz(func(t *testing.T, form uint8, user, pw, host, path, query string) {
		const mark = "Zq9"
		if strings.Contains(user+host+path+query, mark) {
			return
		}
		secret := mark + pw + mark
		server := "amqp://" + url.QueryEscape(user) + ":" + url.QueryEscape(secret) + "@127.0.0.1:1/"
		var raw string
		switch form % 5 {
		case 0:
			raw = "amqp://" + user + ":" + secret + "@" + host + path + "?" + query
		case 1:
			raw = "amqp:" + user + ":" + secret + "@" + host + path + "?" + query
		case 2:
			raw = "rabbit://" + host + path + "?" + query
		case 3:
			raw = "amqps://" + user + ":" + secret + "@" + host + path + "?" + query
		default:
			raw = "rabbit://" + user + ":" + secret + "@" + host + path + "?" + query
		}
		dialer := func(network, addr string) (net.Conn, error) { return nil, errNoNet }
		o := &URLOpener{ServerURL: server, ConnOptions: &ConnOptions{Config: &amqp.Config{Dial: dialer}, Logger: discard}}
		ctx := context.Background()
		check := func(what string, err error) {
			if strings.Contains(err.Error(), mark) {
				t.Fatalf("%s: the error shows the password: %v", what, err)
			}
			if !errors.Is(err, broker.ErrInvalid) && !errors.Is(err, errNoNet) {
				t.Fatalf("%s: %v is neither ErrInvalid nor the dialer's", what, err)
			}
			if s := fmt.Sprintf("%v %+v %#v", o, o, o); strings.Contains(s, mark) {
				t.Fatalf("the opener prints the password: %s", s)
			}
		}
		// Dial takes the raw string; the opener a parsed URL (the URLMux
		// parses it first: a URL that does not parse never reaches it).
		if c, err := Dial(ctx, raw, o.ConnOptions); err == nil {
			_ = c.Close()
			t.Fatal("dialed without a network")
		} else {
			check("dial", err)
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" {
			return
		}
		if tp, err := o.OpenTopicURL(ctx, u); err == nil {
			_ = tp.Close()
			t.Fatal("topic opened without a network")
		} else {
			check("topic", err)
		}
		if sb, err := o.OpenSubscriptionURL(ctx, u); err == nil {
			_ = sb.Close()
			t.Fatal("subscription opened without a network")
		} else {
			check("subscription", err)
		}
		if sb, err := o.OpenDeadLettersURL(ctx, u); err == nil {
			_ = sb.Close()
			t.Fatal("dead letters opened without a network")
		} else {
			check("dead letters", err)
		}
	})
}
