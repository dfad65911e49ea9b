package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultBuild: the example's default build (no tags, what
// "go -C examples run ./orders" compiles and a fresh machine downloads)
// holds only the embedded pair, SQLite and the memory broker; each tag
// builds its service in; and the default binary, given a flag whose
// service it left out, fails with the command that builds it in.
func TestDefaultBuild(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	deps := func(tags string) map[string]bool {
		t.Helper()
		// -tags on the command line: a GOFLAGS of the caller's does not
		// leak in.
		out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-tags="+tags, ".").Output()
		if err != nil {
			t.Fatalf("go list -deps -tags=%s .: %v", tags, err)
		}
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	// What the services bring, by import path prefix.
	left := []string{"github.com/jackc/", "github.com/rabbitmq/", "github.com/twmb/franz-go", "github.com/klauspost/compress/",
		"github.com/aws/", "github.com/Azure/", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters",
		"github.com/wary-go/wary/drivers/rabbit", "github.com/wary-go/wary/drivers/kafka", "github.com/wary-go/wary/drivers/sqsfifo",
		"github.com/wary-go/wary/drivers/servicebus", "github.com/wary-go/wary/drivers/nats", "github.com/nats-io/", "github.com/wary-go/wary/idem/postgres",
		"cloud.google.com/", "google.golang.org/grpc", "github.com/wary-go/wary/drivers/gcppubsub"}
	def := deps("")
	for _, want := range []string{"github.com/wary-go/wary/drivers/memory", "github.com/wary-go/wary/idem/sqlite", "modernc.org/sqlite"} {
		if !def[want] {
			t.Errorf("the default build lacks %s", want)
		}
	}
	// Nor what tests bring: its relay crash is armed through
	// idem/failpoint, which links neither testing nor the store suite.
	for _, p := range []string{"testing", "github.com/wary-go/wary/idem/internal/idemtest", "pgregory.net/rapid"} {
		if def[p] {
			t.Errorf("the default build imports %s, a test's package", p)
		}
	}
	for p := range def {
		for _, l := range left {
			if strings.HasPrefix(p, l) {
				t.Errorf("the default build imports %s: a service's code, to be built only under its tag", p)
			}
		}
	}
	for tag, want := range map[string]string{
		"postgres":   "github.com/wary-go/wary/idem/postgres",
		"rabbit":     "github.com/wary-go/wary/drivers/rabbit",
		"kafka":      "github.com/wary-go/wary/drivers/kafka",
		"sqsfifo":    "github.com/wary-go/wary/drivers/sqsfifo",
		"servicebus": "github.com/wary-go/wary/drivers/servicebus",
		"nats":       "github.com/wary-go/wary/drivers/nats",
		"gcppubsub":  "github.com/wary-go/wary/drivers/gcppubsub",
		"trace":      "go.opentelemetry.io/otel/exporters/stdout/stdouttrace",
	} {
		if !deps(tag)[want] {
			t.Errorf("-tags %s does not build in %s", tag, want)
		}
	}

	if testing.Short() {
		t.Skip("builds the example")
	}
	bin := filepath.Join(t.TempDir(), "orders")
	if out, err := exec.CommandContext(t.Context(), goBin, "build", "-tags=", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-postgres", "postgres://127.0.0.1:1/test"}, "go -C examples run -tags postgres ./orders -postgres URL"},
		{[]string{"-broker", "rabbit://orders"}, "go -C examples run -tags rabbit ./orders -broker rabbit://…"},
		{[]string{"-broker", "amqp://guest:guest@127.0.0.1:1/?exchange=orders"}, "go -C examples run -tags rabbit ./orders -broker amqp://…"},
		{[]string{"-broker", "kafka://orders?brokers=127.0.0.1:1"}, "go -C examples run -tags kafka ./orders -broker kafka://…"},
		{[]string{"-broker", "sqsfifo://orders.fifo?region=us-east-1&endpoint=http://127.0.0.1:1"}, "go -C examples run -tags sqsfifo ./orders -broker sqsfifo://…"},
		{[]string{"-broker", "servicebus://orders"}, "go -C examples run -tags servicebus ./orders -broker servicebus://…"},
		{[]string{"-broker", "nats://127.0.0.1:1/ORDERS?consumer=billing"}, "go -C examples run -tags nats ./orders -broker nats://…"},
		{[]string{"-broker", "gcppubsub://projects/wary/topics/orders"}, "go -C examples run -tags gcppubsub ./orders -broker gcppubsub://…"},
		{[]string{"-trace"}, "go -C examples run -tags trace ./orders -trace"},
	} {
		out, err := exec.CommandContext(t.Context(), bin, tc.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("orders %s: %v, want a failure naming %q:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
}
