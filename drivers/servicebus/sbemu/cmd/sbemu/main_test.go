//go:build unix

package main_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/nodeproc"
)

// TestReadmeCommand runs the guide's command (docs/brokers) as a person would (go run,
// from the module's folder), waits for its "ready" line, publishes and
// receives one message through the connection string, the administration
// endpoint and the plain queue and topic URLs it printed (the driver reads
// the entities' settings: the -max-delivery limit), and stops it with
// Ctrl-C's SIGINT, which leaves no process behind.
func TestReadmeCommand(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		nodeproc.Unavailable(t, "sbemu command: node not found on PATH")
	}
	dir, err := sbemu.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if err := nodeproc.EnsureDeps(dir, "rhea"); err != nil { // the command would; under the tests' shared lock
		nodeproc.Unavailable(t, "sbemu: npm ci failed: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	cmd := nodeproc.RunCommand(t, "../../..", goBin, "run", "./sbemu/cmd/sbemu",
		"-queue", "orders", "-session-queue", "orders-s", "-topic", "events/audit", "-lock", "5s", "-max-delivery", "3")
	out := cmd.WaitLine("ready", 3*time.Minute)

	var env string
	urls := map[string]string{}
	for _, l := range out {
		if strings.HasPrefix(l, "export ") {
			env = l
			continue
		}
		// "<what> servicebus://<entity>?<params>", keyed "<what> <entity>"
		if what, u, ok := strings.Cut(l, " servicebus://"); ok {
			entity, _, _ := strings.Cut(u, "?")
			urls[what+" "+entity] = "servicebus://" + u
		}
	}
	cs, rest, ok := strings.Cut(strings.TrimPrefix(env, "export "+sbemu.EnvConnectionString+"='"), "' ")
	if !ok || !strings.HasPrefix(cs, "Endpoint=sb://127.0.0.1:") || !strings.HasSuffix(cs, ";UseDevelopmentEmulator=true") ||
		!strings.HasPrefix(rest, sbemu.EnvAdminEndpoint+"=http://127.0.0.1:") {
		t.Fatalf("export line %q: want the emulator's connection string on 127.0.0.1 and its admin endpoint", env)
	}
	for _, k := range []string{"queue orders", "session queue orders-s", "topic events", "subscription events/Subscriptions/audit"} {
		if urls[k] == "" {
			t.Fatalf("no %q URL printed; stdout:\n%s", k, strings.Join(out, "\n"))
		}
	}
	for k, u := range urls {
		if strings.Contains(u, "?") && k != "topic events" {
			t.Errorf("%s: %s carries parameters, want a plain URL", k, u)
		}
	}
	t.Setenv(servicebus.ConnectionStringEnv, cs)
	t.Setenv(servicebus.EnvAdminEndpoint, strings.TrimPrefix(rest, sbemu.EnvAdminEndpoint+"="))

	roundTrip(t, urls["queue orders"], urls["queue orders"], &broker.Message{ID: "order-1", Key: "order-1", Body: []byte("placed")})
	roundTrip(t, urls["topic events"], urls["subscription events/Subscriptions/audit"], &broker.Message{ID: "event-1", Key: "order-1", Body: []byte("audited")})

	if stderr, _ := cmd.Interrupt(30 * time.Second); !strings.Contains(stderr, "sbemu: interrupt: stopping") {
		t.Fatalf("after SIGINT the command did not say it stopped; stderr:\n%s", stderr)
	}
	if !cmd.GroupGone() {
		t.Error("a process of the command (the emulator's Node) is still running after it exited")
	}
}

// roundTrip publishes m to topicURL and receives and completes it from subURL.
func roundTrip(t *testing.T, topicURL, subURL string, m *broker.Message) {
	t.Helper()
	ctx := t.Context()
	top, err := broker.OpenTopic(ctx, topicURL)
	if err != nil {
		t.Fatalf("open %s: %v", topicURL, err)
	}
	defer top.Close()
	sub, err := broker.OpenSubscription(ctx, subURL)
	if err != nil {
		t.Fatalf("open %s: %v", subURL, err)
	}
	defer sub.Close()
	if c := sub.Capabilities(); c.DeliveryLimit != 3 || c.Source.Read == "" || len(c.Source.Unread)+len(c.Source.Conflicts) != 0 {
		t.Errorf("%s: %s, source %+v: want the entity's limit 3, read from it", subURL, c, c.Source)
	}
	if err := top.Publish(ctx, m); err != nil {
		t.Fatalf("publish to %s: %v", topicURL, err)
	}
	var got []*broker.Delivery
	for deadline := time.Now().Add(30 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		if got, err = sub.Receive(ctx, 1); err != nil {
			t.Fatalf("receive from %s: %v", subURL, err)
		}
	}
	if len(got) != 1 || got[0].Message.ID != m.ID || string(got[0].Message.Body) != string(m.Body) {
		t.Fatalf("received %v from %s, want %s", got, subURL, m.ID)
	}
	if err := got[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
