package rabbit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/rabbit"
)

// handQueue declares, with amqp091 directly (as a user's own program
// would), a quorum queue with a single active consumer, args (a nil
// value leaves that argument out) and a dead-letter exchange name.dlx,
// deleted at cleanup. It needs the management API (reading through it is
// what is tested) and skips without it, unless WARY_REQUIRE_SERVICES=1.
func handQueue(t *testing.T, args amqp.Table) string {
	t.Helper()
	c := dial(t)
	t.Cleanup(func() { _ = c.Close() })
	conn := c.Connection()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	name := uniqueName("hand")
	if err := ch.ExchangeDeclare(name+".dlx", amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	all := amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.SingleActiveConsumerArg: true}
	for k, v := range args {
		all[k] = v
		if v == nil {
			delete(all, k)
		}
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, all); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch, err := c.Connection().Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name+".dlx", false, false)
	})
	return name
}

// openURL opens rabbit://QUERY on the test server.
func openURL(t *testing.T, query string) (capability.Subscription, error) {
	t.Helper()
	t.Setenv(rabbit.ServerURLEnv, serverURL())
	sub, err := broker.OpenSubscription(ctxT(t), "rabbit://"+query)
	if err != nil {
		return capability.Subscription{}, err
	}
	defer sub.Close()
	return sub.Capabilities(), nil
}

// needManagement skips when the management API does not answer on the
// test server's host (fails with WARY_REQUIRE_SERVICES=1).
func needManagement(t *testing.T, caps capability.Subscription) {
	t.Helper()
	if !caps.Source.IsUnread(capability.SettingDeliveryLimit) || strings.Contains(caps.Source.Read, "management API") {
		return
	}
	msg := "the management API does not answer (rabbitmq-plugins enable rabbitmq_management): " + caps.Source.Unread[0].Why
	if requireServices() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// The subscription states what the broker holds, not what the URL says: a
// queue declared by hand with x-delivery-limit 19 and a dead-letter
// exchange dead-letters after 20 deliveries, read through the management
// API, whatever the URL states; a URL that states another limit is a
// conflict, with the broker's value in the capabilities.
func TestReadHandDeclaredQueue(t *testing.T) {
	q := handQueue(t, amqp.Table{"x-delivery-limit": 19, "x-dead-letter-exchange": "dlx-of-" + "hand"})
	caps, err := openURL(t, q)
	if err != nil {
		t.Fatal(err)
	}
	needManagement(t, caps)
	if caps.DeliveryLimit != 20 || caps.DeliveryLimitMode != capability.LimitNative || !caps.DeadLetter || caps.Ordering != capability.OrderQueue {
		t.Errorf("capabilities %s, want the broker's: 20 deliveries, dead letters, order per queue", caps)
	}
	src := caps.Source
	// Everything is read but the lock, which no interface shows.
	if !strings.Contains(src.Read, "quorum queue "+q+" through the management API at ") || !strings.Contains(src.Read, "x-delivery-limit 19") ||
		len(src.Unread) != 1 || src.Unread[0].Setting != capability.SettingLockTimeout || len(src.Conflicts) != 0 {
		t.Errorf("source %+v", src)
	}

	caps, err = openURL(t, q+"?delivery_limit=5&dead_letter_exchange=elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if caps.DeliveryLimit != 20 || !caps.DeadLetter {
		t.Errorf("capabilities %s, want the broker's 20 deliveries", caps)
	}
	var settings []capability.Setting
	for _, c := range caps.Source.Conflicts {
		settings = append(settings, c.Setting)
		if c.Fix == "" || c.Held == "" || c.Stated == "" {
			t.Errorf("conflict %+v", c)
		}
	}
	if len(settings) != 2 || settings[0] != capability.SettingDeliveryLimit || settings[1] != capability.SettingDeadLetter ||
		!strings.Contains(caps.Source.Conflicts[0].Stated, "delivery_limit=5") || !strings.Contains(caps.Source.Conflicts[0].Held, "20 deliveries") {
		t.Errorf("conflicts %+v", caps.Source.Conflicts)
	}
}

// A policy lowers the limit below the argument: the smaller applies.
// (Only where the test may set policies: the guest user on the local
// server can.)
func TestReadPolicyLowersLimit(t *testing.T) {
	q := handQueue(t, amqp.Table{"x-delivery-limit": 19, "x-dead-letter-exchange": q0dlx})
	caps, err := openURL(t, q)
	if err != nil {
		t.Fatal(err)
	}
	needManagement(t, caps)
	setPolicy(t, q, `{"delivery-limit": 4}`)
	if caps, err = openURL(t, q); err != nil {
		t.Fatal(err)
	}
	if caps.DeliveryLimit != 5 || !strings.Contains(caps.Source.Read, "x-delivery-limit 19 and delivery-limit policy 4") {
		t.Errorf("capabilities %s from %q, want 5 deliveries", caps, caps.Source.Read)
	}
}

const q0dlx = "amq.fanout"

// A queue without a delivery limit is read as none (on RabbitMQ 3.x; from
// 4.0 the server's default), and stated as read: not unknown.
func TestReadQueueWithoutLimit(t *testing.T) {
	q := handQueue(t, nil)
	c := dial(t)
	ver := c.ServerVersion()
	_ = c.Close()
	caps, err := openURL(t, q)
	if err != nil {
		t.Fatal(err)
	}
	needManagement(t, caps)
	want := 0
	if !strings.HasPrefix(ver, "3.") {
		want = 21
	}
	if caps.DeliveryLimit != want || caps.DeadLetter || caps.Source.IsUnread(capability.SettingDeliveryLimit) || len(caps.Source.Conflicts) != 0 {
		t.Errorf("capabilities %s, source %+v; want limit %d, no dead letters, read", caps, caps.Source, want)
	}
}

// Without the management API, the settings a policy could change are
// unread, with why and how to make them readable; the queue's arguments
// are learned over AMQP (a redeclaration, which RabbitMQ refuses with 406
// naming each argument that differs). The dead-letter exchange's argument
// overrules a policy: it is read, and a URL that states another is a
// conflict. The delivery limit's is not the limit: a delivery-limit
// policy, which AMQP cannot show, applies over it when lower, so the
// limit is unread (the capabilities hold the argument's, which the
// subscription counts with), and a URL that states another is no
// conflict.
func TestReadWithoutManagement(t *testing.T) {
	q := handQueue(t, amqp.Table{"x-delivery-limit": 19, "x-dead-letter-exchange": q0dlx, "x-max-length": 1000})
	const off = "management=http://127.0.0.1:1"
	caps, err := openURL(t, q+"?"+off+"&delivery_limit=20&dead_letter_exchange="+q0dlx)
	if err != nil {
		t.Fatal(err)
	}
	src := caps.Source
	if caps.DeliveryLimit != 20 || !caps.DeadLetter || len(src.Conflicts) != 0 || !strings.Contains(src.Read, "over AMQP") {
		t.Errorf("capabilities %s, source %+v", caps, src)
	}
	// The limit and the length (policies), the order
	// (x-single-active-consumer, which AMQP cannot show) and the lock
	// (nothing shows it) are unread.
	if len(src.Unread) != 4 || src.Unread[0].Setting != capability.SettingDeliveryLimit || src.Unread[1].Setting != capability.SettingOrdering ||
		src.Unread[2].Setting != capability.SettingQueueLength || src.Unread[3].Setting != capability.SettingLockTimeout ||
		!strings.Contains(src.Unread[0].Why, "x-delivery-limit 19 is read over AMQP, but a delivery-limit policy") ||
		!strings.Contains(src.Unread[2].Why, "127.0.0.1:1 did not answer") || !strings.Contains(src.Unread[2].Fix, "rabbitmq_management") {
		t.Errorf("unread %+v", src.Unread)
	}
	for _, u := range src.Unread {
		if strings.Contains(u.Why, "guest") {
			t.Errorf("unread names the credentials: %q", u.Why)
		}
	}

	// The URL states 5 deliveries and another dead-letter exchange: the
	// exchange is a conflict, the limit unread.
	caps, err = openURL(t, q+"?"+off+"&delivery_limit=5&dead_letter_exchange=elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if caps.DeliveryLimit != 20 || !caps.Source.IsUnread(capability.SettingDeliveryLimit) || len(caps.Source.Conflicts) != 1 || caps.Source.Conflicts[0].Setting != capability.SettingDeadLetter {
		t.Errorf("capabilities %s, source %+v", caps, caps.Source)
	}

	// A queue without a limit argument: a policy could set one.
	q2 := handQueue(t, nil)
	caps, err = openURL(t, q2+"?management=off")
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Source.IsUnread(capability.SettingDeliveryLimit) || !caps.Source.IsUnread(capability.SettingDeadLetter) {
		t.Errorf("source %+v, want the limit and dead letters unread", caps.Source)
	}
}

// A management address that is not http(s) is refused without echoing
// it; a password in it never shows.
func TestManagementParamInvalid(t *testing.T) {
	q := handQueue(t, nil)
	_, err := openURL(t, q+"?management="+url.QueryEscape("ftp://u:s3cret@h"))
	if !errors.Is(err, broker.ErrInvalid) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("err %v, want ErrInvalid without the password", err)
	}
	caps, err := openURL(t, q+"?management="+url.QueryEscape("http://u:s3cret@127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range caps.Source.Unread {
		if strings.Contains(u.Why+u.Fix, "s3cret") {
			t.Errorf("unread shows the password: %+v", u)
		}
	}
}

// setPolicy applies a policy of definition def to queue q alone, through
// rabbitmqctl's HTTP twin, the management API, as guest; removed at
// cleanup.
func setPolicy(t *testing.T, q, def string) {
	t.Helper()
	ctx := ctxT(t)
	name := "wary-test-" + q
	body := `{"pattern":"^` + strings.ReplaceAll(q, ".", `\\.`) + `$","apply-to":"queues","priority":7,"definition":` + def + `}`
	if err := mgmtDo(ctx, "PUT", "/api/policies/%2F/"+url.PathEscape(name), body); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmtDo(context.Background(), "DELETE", "/api/policies/%2F/"+url.PathEscape(name), "") })
}

func requireServices() bool { return os.Getenv("WARY_REQUIRE_SERVICES") == "1" }

// mgmtDo sends a request to the test server's management API, as the
// user of its AMQP URL.
func mgmtDo(ctx context.Context, method, path, body string) error {
	return mgmtJSON(ctx, method, path, body, nil)
}

// mgmtJSON is mgmtDo that decodes the response's JSON into out (unless nil).
func mgmtJSON(ctx context.Context, method, path, body string, out any) error {
	u, err := url.Parse(serverURL())
	if err != nil {
		return err
	}
	pw, _ := u.User.Password()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+u.Hostname()+":15672"+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.URL.RawPath = path
	req.SetBasicAuth(u.User.Username(), pw)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// The lock's bound is unread on every subscription, whatever was read:
// RabbitMQ's consumer_timeout (server-wide, 30 minutes by default) closes
// the channel of a consumer that holds a delivery longer, and no
// interface shows it. A queue's own x-consumer-timeout, which RabbitMQ
// 3.10 accepts and ignores, is named in why, with what the server does
// with it; the lock stays unread.
func TestReadLockUnread(t *testing.T) {
	c := dial(t)
	ver := c.ServerVersion()
	_ = c.Close()
	q := handQueue(t, nil)
	timed := handQueue(t, amqp.Table{"x-consumer-timeout": int64(60000)})
	for _, query := range []string{q, q + "?management=off", timed} {
		caps, err := openURL(t, query)
		if err != nil {
			t.Fatal(err)
		}
		if query == timed {
			needManagement(t, caps)
		}
		if caps.LockTimeout != 0 || caps.LockExtendable || !caps.Source.IsUnread(capability.SettingLockTimeout) || !strings.Contains(caps.String(), "lock=unknown extend=false") {
			t.Errorf("%s: capabilities %s, source %+v; want the lock unread, not extendable", query, caps, caps.Source)
			continue
		}
		u := caps.Source.Unread[len(caps.Source.Unread)-1]
		if u.Setting != capability.SettingLockTimeout || !strings.Contains(u.Why, "consumer_timeout") || !strings.Contains(u.Why, "30 minutes by default") ||
			!strings.Contains(u.Fix, "cannot be read remotely") {
			t.Errorf("%s: lock unread %+v", query, u)
		}
		named := strings.Contains(u.Why, "x-consumer-timeout ("+timed+": 60000 ms)")
		if named != (query == timed) {
			t.Errorf("%s: why %q names x-consumer-timeout: %v", query, u.Why, named)
		}
		if query == timed && strings.HasPrefix(ver, "3.10.") && !strings.Contains(u.Why, "which RabbitMQ 3.10 ignores") {
			t.Errorf("why %q, want RabbitMQ %s ignoring the argument", u.Why, ver)
		}
	}
}

// A quorum queue declared by hand without x-single-active-consumer
// delivers to its consumers in parallel: no order. Through the management
// API that is read. Over AMQP it cannot be: RabbitMQ does not compare
// x-single-active-consumer on a redeclaration, so the driver's own
// declaration with it succeeds whether or not the queue has it. The order
// is then unread, with why and how to make it readable, and the
// capabilities promise no order (OrderNone), not "order per queue"; the
// same for a queue that has one, and for a classic queue.
func TestReadOrderWithoutManagement(t *testing.T) {
	parallel := handQueue(t, amqp.Table{amqp.SingleActiveConsumerArg: nil, "x-delivery-limit": 19, "x-dead-letter-exchange": q0dlx})
	caps, err := openURL(t, parallel)
	if err != nil {
		t.Fatal(err)
	}
	needManagement(t, caps)
	if caps.Ordering != capability.OrderNone || caps.Source.IsUnread(capability.SettingOrdering) || !strings.Contains(caps.Source.Read, "no x-single-active-consumer") {
		t.Errorf("through the management API: capabilities %s, source %+v; want no order, read", caps, caps.Source)
	}
	single := handQueue(t, nil)
	for _, query := range []string{parallel + "?management=off", single + "?management=off", parallel + "?management=http://127.0.0.1:1"} {
		caps, err := openURL(t, query)
		if err != nil {
			t.Fatal(err)
		}
		if caps.Ordering != capability.OrderNone || !caps.Source.IsUnread(capability.SettingOrdering) {
			t.Errorf("%s: capabilities %s, source %+v; want the order unread, no order promised", query, caps, caps.Source)
			continue
		}
		for _, u := range caps.Source.Unread {
			if u.Setting == capability.SettingOrdering && (!strings.Contains(u.Why, "x-single-active-consumer") || !strings.Contains(u.Fix, "rabbitmq_management")) {
				t.Errorf("%s: order unread %+v", query, u)
			}
		}
	}
}
