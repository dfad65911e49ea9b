package nats

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/conformance/capsdoc"
)

// TestDocCapabilities: docs/brokers/nats.md shows what the driver
// declares for the configurations it names, on a server with the default
// max_payload (1 MiB).
func TestDocCapabilities(t *testing.T) {
	col := func(name string, spec Spec, dlq bool, maxMsgSize int32) capsdoc.Column {
		spec.Stream, spec.Consumer = "ORDERS", "billing"
		spec = spec.withDefaults()
		sc := spec.streamConfig()
		if sc.Duplicates == 0 {
			sc.Duplicates = 2 * time.Minute // the server's default
		}
		sc.MaxMsgSize = maxMsgSize
		tc, err := topicCaps(sc, spec.Subject, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var target *deadLetterTarget
		if dlq {
			target = &deadLetterTarget{stream: spec.DeadLetterStream, subject: DeadLetterSubject(spec.Stream, spec.Consumer)}
		}
		cc := spec.consumerConfig()
		if cc.MaxAckPending == 0 {
			cc.MaxAckPending = 1000
		}
		sub, err := subCaps(sc, cc, target, stated{})
		if err != nil {
			t.Fatal(err)
		}
		return capsdoc.Column{Name: name, Topic: tc, Sub: sub}
	}
	capsdoc.Check(t, "../../docs/brokers/nats.md", []capsdoc.Column{
		col("`Declare` defaults, dead-letter stream", Spec{}, true, -1),
		col("`max_ack_pending` 1, `max_age` 72h, dead-letter stream", Spec{MaxAckPending: 1, MaxAge: 72 * time.Hour}, true, -1),
		col("`max_deliver` -1, `max_msg_size` 64 KiB, no dead-letter stream", Spec{MaxDeliver: -1}, false, 64<<10),
	})
}

// TestSubjectMatches: the stream's subjects, with wildcards, decide what
// a topic may publish.
func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"orders", "orders", true},
		{"orders", "orders.a", false},
		{"orders.>", "orders", false},
		{"orders.>", "orders.a", true},
		{"orders.>", "orders.a.b", true},
		{"orders.*", "orders.a", true},
		{"orders.*", "orders.a.b", false},
		{">", "x", true},
		{"*.a", "x.a", true},
	} {
		if got := subjectMatches(c.pattern, c.subject); got != c.want {
			t.Errorf("subjectMatches(%q, %q) = %t", c.pattern, c.subject, got)
		}
	}
	var cfg jetstream.StreamConfig
	cfg.Name = "ORDERS"
	if !captures(cfg, "ORDERS") {
		t.Errorf("a stream without subjects captures its name")
	}
}
