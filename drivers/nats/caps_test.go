package nats_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/drivers/nats"
)

// TestCapabilitiesFromServer: what a topic and subscription declare is
// read from the live stream and consumer (not from the URL), and a URL
// that states another ack_wait than the consumer holds is a conflict
// whose held value applies.
func TestCapabilitiesFromServer(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{AckWait: 7 * time.Second, MaxDeliver: 3, MaxAckPending: 1, DuplicateWindow: 10 * time.Second, MaxAge: time.Hour})
	ctx := ctxT(t)
	st, err := js.Stream(ctx, spec.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 5000
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("%s/%s?subject=%s&consumer=%s", url, spec.Stream, spec.Subject, spec.Consumer)
	top, err := broker.OpenTopic(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	tc := top.Capabilities()
	if tc.DedupWindow != 10*time.Second || tc.DedupScope != capability.DedupQueue || tc.MaxMessageSize != 5000-nats.SizeReserve || tc.KeyRequired {
		t.Errorf("topic: %s", tc)
	}
	if !strings.Contains(tc.Source.Read, spec.Stream) || len(tc.Source.Unread) > 0 || len(tc.Source.Conflicts) > 0 {
		t.Errorf("topic source: %+v", tc.Source)
	}
	sub, err := broker.OpenSubscription(ctx, base+"&ack_wait=9s&max_deliver=3")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sc := sub.Capabilities()
	if sc.LockTimeout != 7*time.Second || sc.DeliveryLimit != 2 || sc.DeliveryLimitMode != capability.LimitNative || !sc.DeadLetter ||
		sc.Ordering != capability.OrderQueue || !sc.HeadOfLine || sc.RedeliveryHorizon != time.Hour {
		t.Errorf("subscription: %s", sc)
	}
	if len(sc.Source.Conflicts) != 1 || sc.Source.Conflicts[0].Setting != capability.SettingLockTimeout || !strings.Contains(sc.Source.Conflicts[0].Held, "7s") {
		t.Errorf("conflicts: %+v", sc.Source.Conflicts)
	}
	if !strings.Contains(sc.Source.Read, "ack_wait 7s") || !strings.Contains(sc.Source.Read, nats.DeadLetterStream(spec.Stream)) {
		t.Errorf("read: %s", sc.Source.Read)
	}
	// Without the dead-letter stream: no DeadLetter, and the limit is
	// max_deliver itself.
	if err := js.DeleteStream(ctx, nats.DeadLetterStream(spec.Stream)); err != nil {
		t.Fatal(err)
	}
	sub2, err := broker.OpenSubscription(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	if c := sub2.Capabilities(); c.DeadLetter || c.DeliveryLimit != 3 || !strings.Contains(c.Source.Read, "no dead-letter stream") {
		t.Errorf("without a dead-letter stream: %s (%s)", c, c.Source.Read)
	}
}

// TestOpenErrors: missing entities are ErrNotFound; bad URLs, hostile
// names and consumers the driver cannot serve are ErrInvalid, and no
// error repeats the password.
func TestOpenErrors(t *testing.T) {
	url := serverURL(t)
	_, js := connect(t, url)
	spec := declare(t, js, nats.Spec{})
	ctx := ctxT(t)
	host := strings.TrimPrefix(url, "nats://")
	for name, c := range map[string]struct {
		url  string
		want error
	}{
		"unknown parameter":   {url + "/" + spec.Stream + "?bogus=1", broker.ErrInvalid},
		"bad duration":        {url + "/" + spec.Stream + "?consumer=c&ack_wait=soon", broker.ErrInvalid},
		"bad prefetch":        {url + "/" + spec.Stream + "?consumer=c&prefetch=maybe", broker.ErrInvalid},
		"no stream":           {url + "/", broker.ErrInvalid},
		"dotted stream":       {url + "/a.b?consumer=c", broker.ErrInvalid},
		"wildcard stream":     {url + "/a*?consumer=c", broker.ErrInvalid},
		"no consumer":         {url + "/" + spec.Stream, broker.ErrInvalid},
		"hostile consumer":    {url + "/" + spec.Stream + "?consumer=a%20b", broker.ErrInvalid},
		"hostile subject":     {url + "/" + spec.Stream + "?consumer=c&subject=a..b", broker.ErrInvalid},
		"wildcard subject":    {url + "/" + spec.Stream + "?consumer=c&subject=a.>", broker.ErrInvalid},
		"uncaptured subject":  {url + "/" + spec.Stream + "?consumer=c&subject=elsewhere", broker.ErrInvalid},
		"missing stream":      {url + "/nope_" + spec.Stream + "?consumer=c", broker.ErrNotFound},
		"missing consumer":    {url + "/" + spec.Stream + "?consumer=nope", broker.ErrNotFound},
		"password not echoed": {"nats://wary:s3cr3t-pw@" + host + "/" + spec.Stream + "?consumer=c&bogus=s3cr3t-pw", broker.ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := broker.OpenSubscription(ctx, c.url)
			if err == nil && strings.Contains(name, "subject") {
				// a subscription does not publish: its topic refuses it
				s.Close()
				_, err = broker.OpenTopic(ctx, c.url)
			} else if err == nil {
				s.Close()
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cr3t-pw") {
				t.Fatalf("the error repeats the password: %v", err)
			}
		})
	}
	// A consumer that acknowledges nothing loses every delivery: refused.
	if _, err := js.CreateConsumer(ctx, spec.Stream, jetstreamNoAck("noack")); err != nil {
		t.Fatal(err)
	}
	if _, err := nats.OpenSubscription(ctx, js, spec.Stream, "noack", nil); !errors.Is(err, broker.ErrInvalid) {
		t.Fatalf("ack_policy none: %v, want ErrInvalid", err)
	}
}
