//go:build unix

package main_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	_ "github.com/wary-go/wary/drivers/sqsfifo" // sqsfifo:// URLs
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
	"github.com/wary-go/wary/nodeproc"
)

// TestReadmeCommand runs the guide's command (docs/brokers) as a person would (go run,
// from the module's folder), waits for its "ready" line, publishes and
// receives one message through the queue URL it printed, and stops it
// with Ctrl-C's SIGINT: it exits 0 and leaves no process behind.
func TestReadmeCommand(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		sqsemu.Unavailable(t, "fauxqs command: npm not found on PATH")
	}
	dir, err := sqsemu.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqsemu.EnsureDeps(dir); err != nil { // the command would; under the tests' shared lock
		sqsemu.Unavailable(t, "fauxqs: npm ci failed: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	cmd := nodeproc.RunCommand(t, "../../..", goBin, "run", "./sqsemu/cmd/fauxqs", "-queue", "orders", "-max-receive", "3")
	out := cmd.WaitLine("ready", 3*time.Minute)

	var env, queue, dlq string
	for _, l := range out {
		switch {
		case strings.HasPrefix(l, "export "):
			env = l
		case strings.HasPrefix(l, "queue "):
			queue = strings.TrimPrefix(l, "queue ")
		case strings.HasPrefix(l, "dead-letter queue "):
			dlq = strings.Fields(strings.TrimPrefix(l, "dead-letter queue "))[0]
		}
	}
	for _, want := range []string{"WARY_SQS_ENDPOINT=http://127.0.0.1:", "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"} {
		if !strings.Contains(env, want) {
			t.Errorf("export line %q lacks %q", env, want)
		}
	}
	if !strings.HasPrefix(queue, "sqsfifo://orders.fifo?endpoint=http://127.0.0.1:") || !strings.HasPrefix(dlq, "sqsfifo://orders-dlq.fifo?") {
		t.Fatalf("queue URLs %q and %q, want orders.fifo and orders-dlq.fifo on 127.0.0.1; stdout:\n%s", queue, dlq, strings.Join(out, "\n"))
	}
	for _, kv := range strings.Fields(strings.TrimPrefix(env, "export ")) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)

	ctx := t.Context()
	top, err := broker.OpenTopic(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := top.Publish(ctx, &broker.Message{ID: "order-1", Key: "order-1", Body: []byte("placed")}); err != nil {
		t.Fatal(err)
	}
	var got []*broker.Delivery
	for deadline := time.Now().Add(30 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		if got, err = sub.Receive(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 1 || got[0].Message.ID != "order-1" || string(got[0].Message.Body) != "placed" {
		t.Fatalf("received %v, want order-1", got)
	}
	if err := got[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// go run itself exits 1 when its group is interrupted, whatever its
	// child returns: what counts is that the command stopped, said so,
	// and took fauxqs with it.
	if stderr, _ := cmd.Interrupt(30 * time.Second); !strings.Contains(stderr, "fauxqs: interrupt: stopping") {
		t.Fatalf("after SIGINT the command did not say it stopped; stderr:\n%s", stderr)
	}
	if !cmd.GroupGone() {
		t.Error("a process of the command (fauxqs's Node) is still running after it exited")
	}
}
