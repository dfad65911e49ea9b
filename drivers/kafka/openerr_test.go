package kafka_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/drivers/kafka"
)

// TestOpenErrors: the constructors' errors are *driver.Error, classified:
// a missing topic is ErrNotFound, an inconsistent option ErrInvalid.
func TestOpenErrors(t *testing.T) {
	e := newTestEnv(t)
	topic := e.createTopic(t, 1, "openerr")
	absent := uniqueName("absent")
	for _, c := range []struct {
		name  string
		open  func() error
		class error
	}{
		{"absent topic", func() error { _, err := kafka.OpenTopic(t.Context(), e.topicClient(t), absent, nil); return err }, broker.ErrNotFound},
		{"absent subscription topic", func() error {
			_, err := e.openSub(t.Context(), t, absent, uniqueName("g"), nil)
			return err
		}, broker.ErrNotFound},
		{"absent dead-letter topic", func() error {
			_, err := e.openSub(t.Context(), t, topic, uniqueName("g"), &kafka.SubscriptionOptions{DeadLetterTopic: absent})
			return err
		}, broker.ErrNotFound},
		{"acks", func() error {
			_, err := kafka.OpenTopic(t.Context(), e.topicClient(t, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()), topic, nil)
			return err
		}, broker.ErrInvalid},
		{"bad kgo option", func() error {
			// Only the URL opener builds clients: it reports kgo's refusal.
			o := &kafka.URLOpener{ClientOpts: []kgo.Opt{kgo.ProducerBatchMaxBytes(1)}}
			_, err := o.OpenTopicURL(t.Context(), &url.URL{Scheme: "kafka", Host: topic, RawQuery: "brokers=" + strings.Join(e.seeds, ",")})
			return err
		}, broker.ErrInvalid},
		{"limit without dead-letter topic", func() error {
			_, err := e.openSub(t.Context(), t, topic, uniqueName("g"), &kafka.SubscriptionOptions{DeliveryLimit: 3})
			return err
		}, broker.ErrInvalid},
		{"topic name with a slash", func() error { _, err := kafka.OpenTopic(t.Context(), e.topicClient(t), "a/b", nil); return err }, broker.ErrInvalid},
		{"retry topic name too long", func() error {
			_, err := e.openSub(t.Context(), t, topic, uniqueName("g"), &kafka.SubscriptionOptions{RetryTopic: strings.Repeat("r", 250)})
			return err
		}, broker.ErrInvalid},
	} {
		err := c.open()
		var de *driver.Error
		if !errors.As(err, &de) || de.Op != "open" || !errors.Is(err, c.class) {
			t.Errorf("%s: %v (%T), want a *driver.Error of op open matching %v", c.name, err, err, c.class)
		}
	}
}

// TestSASLFailure: a wrong SASL password is ErrPermission, says that
// authentication failed, and does not show the password.
func TestSASLFailure(t *testing.T) {
	e := newTestEnv(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "right-pw"), kfake.Superuser("SCRAM-SHA-256", "admin", "right-pw"))
	const wrong = "Wr0ngPassw0rd"
	for _, mech := range []kgo.Opt{
		kgo.SASL(plain.Auth{User: "admin", Pass: wrong}.AsMechanism()),
		kgo.SASL(scram.Auth{User: "admin", Pass: wrong}.AsSha256Mechanism()),
	} {
		opts := []kgo.Opt{kgo.SeedBrokers(e.seeds...), mech, kgo.RetryTimeout(5 * time.Second)}
		tcl, err := kgo.NewClient(append(kafka.TopicOpts(), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer tcl.Close()
		scl, err := kgo.NewClient(append(kafka.SubscriptionOpts("g"), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer scl.Close()
		_, terr := kafka.OpenTopic(t.Context(), tcl, "t", nil)
		_, serr := kafka.OpenSubscription(t.Context(), scl, "t", "g", nil)
		for _, err := range []error{terr, serr} {
			if !errors.Is(err, broker.ErrPermission) || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), wrong) {
				t.Errorf("wrong SASL password: %v, want ErrPermission saying authentication failed, without the password", err)
			}
		}
	}
}

// TestSASLFailurePublish: a topic opened without the checks (SkipCheck)
// whose login the broker rejects fails its publish with ErrPermission
// when the broker answers, long before the caller's deadline, saying that
// authentication failed and not showing the password.
func TestSASLFailurePublish(t *testing.T) {
	e := newTestEnv(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "right-pw"))
	const wrong = "Wr0ngPassw0rd"
	cl, err := kgo.NewClient(append(kafka.TopicOpts(), kgo.SeedBrokers(e.seeds...), kgo.SASL(plain.Auth{User: "admin", Pass: wrong}.AsMechanism()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	top, err := kafka.OpenTopic(t.Context(), cl, "t", &kafka.TopicOptions{SkipCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = top.Publish(ctx, &broker.Message{ID: "m", Body: []byte("x")})
	if !errors.Is(err, broker.ErrPermission) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("publish with a rejected login: %v, want ErrPermission saying authentication failed, without the password", err)
	}
}
