package cli_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// fauxqs starts fauxqs with a shortened dedup window, and dummy
// credentials in the environment for the SDK's default chain, which
// sqsfifo:// URLs use. It skips with WARY_SQS_ENDPOINT set: the tests need
// a window shorter than SQS's 5 minutes.
func fauxqs(t *testing.T, window time.Duration) *sqsemu.Server {
	srv := sqsemu.Start(t, sqsemu.Options{DedupWindow: window})
	if srv.Real {
		t.Skip("runs on fauxqs: it needs a dedup window shorter than SQS's 5 minutes")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	return srv
}

// TestSQSDLQ: dead letters of an SQS FIFO queue (fauxqs) are listed,
// replayed and discarded through the source queue's sqsfifo:// URL.
func TestSQSDLQ(t *testing.T) {
	// A one-second dedup window, so that the replay (same ID) is not
	// dropped as a duplicate of the first publish a few commands earlier.
	srv := fauxqs(t, time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := srv.NewClient(t, nil)
	name := unique("wary-cli")
	handFIFO(ctx, t, c, name, 5, map[string]string{"VisibilityTimeout": "30"})

	w := newWary(t)
	w.env[cli.EnvSQS] = srv.Endpoint
	q := "?region=" + sqsemu.Region
	top := mustOpenTopic(t, "sqsfifo://"+name+".fifo"+q+"&endpoint="+srv.Endpoint)
	sub := mustOpenSub(t, "sqsfifo://"+name+".fifo"+q+"&endpoint="+srv.Endpoint+"&wait_time=1s")
	dlqWalkthrough(t, w, top, "sqsfifo://"+name+".fifo"+q, sub, "sqsfifo://"+name+".fifo"+q, "5s")
}

// TestProbeSQS: the SQS FIFO driver keeps what it declares on fauxqs,
// measured on scratch queues that probe creates and deletes.
func TestProbeSQS(t *testing.T) {
	srv := fauxqs(t, 3*time.Second)
	w := newWary(t)
	w.env[cli.EnvSQS] = srv.Endpoint
	r := w.want(cli.ExitOK, "probe", "sqsfifo://scratch?region="+sqsemu.Region+"&dedup_window=3s",
		"--only", "order-within-scope,head-of-line,dedup-within-window,dedup-expires-after-window,delivery-limit-dead-letters,lock-expiry-redelivers")
	r.has(t, "order per message group", "dedup 3s per queue", "limit 3 (native)", "lock 3s", "every observation matches the declaration")
}

// TestSQSExplainReadsQueue: explain states what a FIFO queue created by
// hand (not by wary) holds, read from its attributes: a RedrivePolicy's
// limit and dead-letter queue; a queue without one is flagged, as is one
// with VisibilityTimeout 0 (no lock); the dedup window, which no attribute
// holds, is unknown on an emulator.
func TestSQSExplainReadsQueue(t *testing.T) {
	srv := fauxqs(t, 3*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := srv.NewClient(t, nil)
	name := unique("wary-explain")
	handFIFO(ctx, t, c, name, 4, map[string]string{"VisibilityTimeout": "45", "MessageRetentionPeriod": "86400"})
	handFIFO(ctx, t, c, name+"-nolimit", 0, map[string]string{})
	handFIFO(ctx, t, c, name+"-nolock", 4, map[string]string{"VisibilityTimeout": "0"})

	w := newWary(t)
	w.env[cli.EnvSQS] = srv.Endpoint
	q := "?region=" + sqsemu.Region + "&dedup_window=3s"
	u := "sqsfifo://" + name + ".fifo" + q
	r := w.want(cli.ExitOK, "explain", "--broker", u, "--subscription", u, "--outbox", "--inbox", "--consumer", "billing", "--ordered")
	r.has(t, "dead-letters after 4 deliveries (native)", "lock 45s",
		"subscription read from FIFO queue "+name+".fifo's attributes (GetQueueAttributes)",
		"topic read from FIFO queue "+name+".fifo's attributes (GetQueueAttributes)",
		"broker dedup unknown", "UNKNOWN (transport): the topic's dedup window could not be read from the broker",
		"to read it: none through SQS's API")

	u = "sqsfifo://" + name + "-nolimit.fifo" + q
	r = w.want(cli.ExitFinding, "explain", "--broker", u, "--subscription", u, "--outbox", "--inbox", "--consumer", "billing")
	r.has(t, "no delivery limit: a message whose handler always fails", "subscription read from FIFO queue "+name+"-nolimit.fifo's attributes")

	// VisibilityTimeout 0 locks nothing (SQS hands an unsettled message
	// out again at once): no lock, not "held until settled", flagged.
	u = "sqsfifo://" + name + "-nolock.fifo" + q
	r = w.want(cli.ExitFinding, "explain", "--broker", u, "--subscription", u, "--outbox", "--inbox", "--consumer", "billing")
	r.has(t, "no lock (an unsettled delivery is visible again at once)",
		"no lock: each delivery is visible again at once", "Subscription.Run refuses the subscription",
		"a VisibilityTimeout above 0")
	if strings.Contains(r.out, "held until settled") {
		t.Errorf("a queue without a lock stated as held until settled:\n%s", r.out)
	}
}

// handFIFO creates, with the SDK and not through wary, the FIFO queue
// NAME.fifo with attrs and, when maxReceive is above 0, its dead-letter
// queue NAME-dlq.fifo named by a RedrivePolicy of maxReceive; both are
// deleted at cleanup.
func handFIFO(ctx context.Context, t *testing.T, c *sqs.Client, name string, maxReceive int, attrs map[string]string) {
	t.Helper()
	create := func(name string, attrs map[string]string) string {
		attrs["FifoQueue"] = "true"
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		return aws.ToString(out.QueueUrl)
	}
	if maxReceive > 0 {
		dlq := create(name+"-dlq.fifo", map[string]string{})
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, a.Attributes["QueueArn"], maxReceive)
	}
	create(name+".fifo", attrs)
}

// TestSQSGuideExplain (issue 44): the SQS FIFO guide's own wary explain
// command, run as written (the emulator's sample endpoint replaced by this
// test's, from the repository's root, where the guide runs it) on the
// queue the guide's emulator command creates, states the orders example's
// pipeline without a misconfiguration.
func TestSQSGuideExplain(t *testing.T) {
	guide, err := os.ReadFile("../../../../docs/brokers/sqs-fifo.md")
	if err != nil {
		t.Fatal(err)
	}
	const sample = "http://127.0.0.1:40117"
	emuLine := guideLine(t, string(guide), "go -C drivers/sqsfifo run ./sqsemu/cmd/fauxqs ")
	line := guideLine(t, string(guide), "wary explain ")
	var queue string
	var maxReceive int
	if _, err := fmt.Sscanf(emuLine, "go -C drivers/sqsfifo run ./sqsemu/cmd/fauxqs -queue %s -max-receive %d", &queue, &maxReceive); err != nil {
		t.Fatalf("the guide's emulator command %q: %v", emuLine, err)
	}
	srv := fauxqs(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, _, err := sqsemu.CreateNamedQueue(ctx, srv.NewClient(t, nil), queue, sqsemu.QueueSpec{MaxReceive: maxReceive}); err != nil {
		t.Fatal(err)
	}
	args := shellWords(t, strings.ReplaceAll(line, sample, srv.Endpoint))
	t.Chdir("../../../..")
	r := newWary(t).want(cli.ExitOK, args[1:]...)
	r.has(t, "subscription read from FIFO queue "+queue+".fifo's attributes", fmt.Sprintf("dead-letters after %d deliveries", maxReceive), "no misconfiguration found")
}

// guideLine is the only line of doc that starts with prefix.
func guideLine(t *testing.T, doc, prefix string) string {
	t.Helper()
	var found []string
	for l := range strings.Lines(doc) {
		if strings.HasPrefix(l, prefix) {
			found = append(found, strings.TrimSpace(l))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines start with %q, want 1: %q", len(found), prefix, found)
	}
	return found[0]
}

// shellWords splits a command line as sh does, for words separated by
// spaces and quoted in single quotes only.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, started := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			in, started = !in, true
		case r == ' ' && !in:
			if started {
				words = append(words, w.String())
				w.Reset()
				started = false
			}
		case strings.ContainsRune(`"$\`, r) && !in:
			t.Fatalf("the command %q is not plain words in single quotes", line)
		default:
			w.WriteRune(r)
			started = true
		}
	}
	if in {
		t.Fatalf("the command %q has an unclosed quote", line)
	}
	if started {
		words = append(words, w.String())
	}
	return words
}
