package cli_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
	"github.com/wary-go/wary/internal/servicetest"
)

// rabbitServer returns the test server's URL (set in WARY_RABBIT_URL for
// rabbit:// URLs) and a Conn to it, closed at cleanup.
func rabbitServer(t *testing.T) (string, *rabbit.Conn) {
	t.Helper()
	server := servicetest.URL(t, rabbit.ServerURLEnv, "amqp://guest:guest@127.0.0.1:5672/", func(ctx context.Context, url string) error {
		c, err := rabbit.Dial(ctx, url, nil)
		if err != nil {
			return err
		}
		return c.Close()
	})
	t.Setenv(rabbit.ServerURLEnv, server)
	conn, err := rabbit.Dial(t.Context(), server, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return server, conn
}

// TestTopologyRabbitIssue28: on a fresh RabbitMQ, explain on an amqp://
// URL naming an exchange fails (exit 2) with one "wary:" prefix and the
// command that declares it; wary topology shows the exchange missing
// (exit 1), --apply declares it, a second run finds it (exit 0), and
// explain then opens the URL.
func TestTopologyRabbitIssue28(t *testing.T) {
	server, conn := rabbitServer(t)
	name := unique("wary-cli-topo")
	top := rabbit.Topology{Exchange: name, Queue: name + ".billing", DeliveryLimit: 5, DeadLetter: true}
	t.Cleanup(func() { _ = top.Delete(context.Background(), conn) })
	u, _ := url.Parse(server)
	u.Path, u.RawQuery = "/", "exchange="+name
	exURL := u.String()
	subURL := "rabbit://" + top.Queue + "?exchange=" + name + "&delivery_limit=5&dead_letter_exchange=" + top.DeadLetterExchange()
	w := newWary(t)
	explain := []string{"explain", "--broker", exURL, "--subscription", subURL, "--inbox=false", "--outbox=false"}

	r := w.want(cli.ExitError, explain...)
	if strings.Count(r.errout, "wary:") != 1 || !strings.Contains(r.errout, "open topic ") || !strings.Contains(r.errout, "wary topology URL --apply") {
		t.Errorf("explain on a missing exchange: want one wary: prefix and the topology command:\n%s", r.errout)
	}
	if strings.Contains(r.errout, "guest:guest") {
		t.Errorf("the password is printed:\n%s", r.errout)
	}

	r = w.want(cli.ExitFinding, "topology", exURL)
	r.has(t, "missing", "exchange", name, "type fanout", "1 missing: run again with --apply")
	if strings.Contains(r.out, "guest:guest") {
		t.Errorf("the password is printed:\n%s", r.out)
	}
	r = w.want(cli.ExitOK, "topology", exURL, "--apply")
	r.has(t, "declared", "exchange")
	r = w.want(cli.ExitOK, "topology", exURL)
	r.has(t, "exists", "all exist as the URL states")

	r = w.want(cli.ExitFinding, "topology", exURL, subURL)
	r.has(t, "missing  dead-letter exchange  "+top.DeadLetterExchange(), "missing  quorum queue", top.Queue, "x-delivery-limit 4", "3 missing")
	w.want(cli.ExitOK, "topology", exURL, subURL, "--apply")
	var out []struct {
		URL      string
		Entities []struct {
			Kind   string
			Name   string
			Exists bool
		}
	}
	w.want(cli.ExitOK, "topology", subURL, "--json").json(t, &out)
	if len(out) != 1 || len(out[0].Entities) != 4 {
		t.Fatalf("--json: %+v", out)
	}
	for _, e := range out[0].Entities {
		if !e.Exists {
			t.Errorf("%s %s does not exist after --apply", e.Kind, e.Name)
		}
	}

	// It exits 1 for the missing outbox and inbox, not for the broker,
	// whose one unknown (the lock's bound, consumer_timeout) weakens the
	// transport without a finding.
	r = w.want(cli.ExitFinding, explain...)
	r.has(t, "transport:   [weak]", "lock unknown", "dead-letters after 5 deliveries", "subscription read from quorum queue "+top.Queue)
	if strings.Contains(r.out, "MISCONFIGURED (transport)") {
		t.Errorf("the broker flagged:\n%s", r.out)
	}
	if !strings.Contains(r.out, "through the management API") && os.Getenv("WARY_REQUIRE_SERVICES") == "1" {
		t.Errorf("explain did not read the queue through the management API:\n%s", r.out)
	}
}

// TestTopologyRabbitDiffers: a queue that exists with other arguments
// than the URL states is reported as differing (exit 1, with --apply
// too), and --apply declares only what is missing around it.
func TestTopologyRabbitDiffers(t *testing.T) {
	_, conn := rabbitServer(t)
	q := handQueue(t, map[string]any{"x-delivery-limit": 19})
	t.Cleanup(func() {
		_ = rabbit.Topology{Exchange: q + ".none", Queue: q, DeadLetter: true}.Delete(context.Background(), conn)
	})
	u := "rabbit://" + q + "?delivery_limit=5&dead_letter_exchange=" + q + ".dlx"
	w := newWary(t)
	r := w.want(cli.ExitFinding, "topology", u)
	r.has(t, "DIFFERS", "dead-letter target is none, the URL states \""+q+".dlx\"", "missing  dead-letter queue")
	if strings.Contains(r.out, "through the management API") || strings.Contains(r.out, "x-delivery-limit 19") {
		r.has(t, "delivery limit is 20 deliveries")
	}
	r = w.want(cli.ExitFinding, "topology", u, "--apply")
	r.has(t, "declared  dead-letter queue", "DIFFERS", "left as it is")
	r = w.want(cli.ExitFinding, "topology", u)
	r.has(t, "DIFFERS", "1 differ from the URL")
	// The queue kept its arguments: explain reads 20 deliveries.
	r = w.want(cli.ExitFinding, "explain", "--broker", "rabbit://amq.fanout", "--subscription", u, "--inbox=false", "--outbox=false")
	r.has(t, "20 deliveries")
}

// TestTopologySQS: wary topology on fauxqs shows the FIFO queue and its
// dead-letter queue missing, --apply creates them with the driver's
// CreateQueue, a second run finds them, explain reads the declared
// settings from the queue's attributes, and a URL stating another
// maxReceiveCount is reported as differing and changes nothing.
func TestTopologySQS(t *testing.T) {
	srv := fauxqs(t, 3*time.Second)
	c := srv.NewClient(t, nil)
	name := unique("wary-cli-topo")
	t.Cleanup(func() {
		for _, n := range []string{name + ".fifo", name + "-dlq.fifo"} {
			if out, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(n)}); err == nil {
				_, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
			}
		}
	})
	w := newWary(t)
	w.env[cli.EnvSQS] = srv.Endpoint
	u := "sqsfifo://" + name + ".fifo?region=" + sqsemu.Region + "&dedup_window=3s&max_receive=4&visibility=45s"
	r := w.want(cli.ExitFinding, "topology", u)
	r.has(t, "missing  dead-letter queue  "+name+"-dlq.fifo", "missing  FIFO queue", "VisibilityTimeout 45", "RedrivePolicy maxReceiveCount 4", "2 missing")
	w.want(cli.ExitOK, "topology", u, "--apply").has(t, "declared  FIFO queue")
	w.want(cli.ExitOK, "topology", u).has(t, "exists", "all exist as the URL states")

	r = w.want(cli.ExitOK, "explain", "--broker", u, "--subscription", u, "--outbox", "--inbox", "--consumer", "billing", "--ordered")
	r.has(t, "dead-letters after 4 deliveries (native)", "lock 45s", "subscription read from FIFO queue "+name+".fifo's attributes (GetQueueAttributes)")

	other := strings.Replace(u, "max_receive=4", "max_receive=7", 1)
	r = w.want(cli.ExitFinding, "topology", other, "--apply")
	r.has(t, "DIFFERS", "delivery limit is RedrivePolicy maxReceiveCount 4, the URL states max_receive=7 in the URL", "left as it is")
	r = w.want(cli.ExitFinding, "explain", "--broker", other, "--subscription", other, "--outbox", "--inbox", "--consumer", "billing", "--ordered")
	r.has(t, "dead-letters after 4 deliveries (native)", "max_receive=7")
}

// TestTopologyServiceBus: on our emulator, wary topology shows a queue,
// and a topic with its subscription, missing; --apply creates them through
// the administration API with the URL's properties; a second run finds
// them; explain reads those properties back; a URL stating another
// MaxDeliveryCount is reported as differing and changes nothing.
func TestTopologyServiceBus(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{})
	sbEnv(t, emu)
	adm := emu.AdminClient(t)
	q, tp := sbemu.UniqueName("topoq"), sbemu.UniqueName("topot")
	t.Cleanup(func() {
		_, _ = adm.DeleteQueue(context.Background(), q, nil)
		_, _ = adm.DeleteTopic(context.Background(), tp, nil)
	})
	w := newWary(t)
	qURL := "servicebus://" + q + "?max_delivery_count=4&lock_duration=7s"
	sURL := "servicebus://" + tp + "/Subscriptions/audit?max_delivery_count=6&sessions=true"
	r := w.want(cli.ExitFinding, "topology", qURL, sURL)
	r.has(t, "missing  queue  "+q, "MaxDeliveryCount 4", "LockDuration 7s", "missing  topic", "missing  subscription  "+tp+"/Subscriptions/audit", "RequiresSession true")
	if strings.Contains(r.out+r.errout, "SharedAccessKey=") {
		t.Errorf("the connection string is printed")
	}
	w.want(cli.ExitOK, "topology", qURL, sURL, "--apply").has(t, "declared  queue", "declared  subscription")
	w.want(cli.ExitOK, "topology", qURL, sURL).has(t, "exists", "all exist as the URL states")

	r = w.want(cli.ExitFinding, "explain", "--broker", qURL, "--subscription", qURL, "--inbox=false", "--outbox=false")
	r.has(t, "dead-letters after 4 deliveries", "lock 7s", "through the administration API")
	r = w.want(cli.ExitFinding, "explain", "--broker", "servicebus://"+tp+"?sessions=true", "--subscription", sURL, "--inbox=false", "--outbox=false")
	r.has(t, "dead-letters after 6 deliveries", "through the administration API")

	other := "servicebus://" + q + "?max_delivery_count=9&lock_duration=7s"
	r = w.want(cli.ExitFinding, "topology", other, "--apply")
	r.has(t, "DIFFERS", "MaxDeliveryCount 4, the URL states max_delivery_count=9", "left as it is")
	w.want(cli.ExitFinding, "explain", "--broker", qURL, "--subscription", other, "--inbox=false", "--outbox=false").has(t, "dead-letters after 4 deliveries")
}
