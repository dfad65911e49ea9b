package cli_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/rabbit"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

// probeReport is the part of probe --json about the user's entity and the
// scratch entities.
type probeReport struct {
	Entity struct {
		Name     string
		Read     bool
		Why      string
		Settings string
	}
	Scratch struct {
		Own       bool `json:"own_settings"`
		Copied    []string
		NotCopied []struct{ Setting, Yours, Scratch, Why string } `json:"not_copied"`
	}
	Results []struct{ Scenario, Outcome, Declared string }
}

// TestProbeCopiesMemorySettings: a memory URL's parameters are its
// entity's settings: probe states them as the entity's, and measures on
// scratch entities with them copied (limit 10 and a 30s lock, not its own
// 3 and 2s), which the fake clock makes free to wait out.
func TestProbeCopiesMemorySettings(t *testing.T) {
	w := newWary(t)
	u := "mem://orders?limit=10&lock=30s"
	only := "delivery-limit-dead-letters,lock-expiry-redelivers"
	r := w.want(cli.ExitOK, "probe", u, "--only", only)
	r.has(t, "your entity orders (read only", "delivery-limit=10(native)", "lock=30s",
		"with your entity's settings copied", "copied: delivery limit 10 (native); dead-letter target yes; lock timeout 30s",
		"DECLARED is what the scratch entities declare (your entity's settings copied), not your entity's declaration",
		"limit 10 (native)", "lock 30s", "every observation matches the declaration")
	var res probeReport
	w.want(cli.ExitOK, "probe", u, "--only", only, "--json").json(t, &res)
	if !res.Entity.Read || res.Entity.Name != "orders" || res.Scratch.Own || !slices.Contains(res.Scratch.Copied, "delivery limit 10 (native)") {
		t.Errorf("probe --json: %+v, want the entity read and its limit copied", res)
	}
	for _, x := range res.Results {
		if x.Outcome != "kept" {
			t.Errorf("%s: %s", x.Scenario, x.Outcome)
		}
	}
}

// TestProbeRabbitCopiesQueue: a quorum queue declared by hand with
// x-delivery-limit 4 (5 deliveries) and a dead-letter exchange is read,
// not used, and the scratch queue gets its limit.
func TestProbeRabbitCopiesQueue(t *testing.T) {
	rabbitTopology(t) // skips when RabbitMQ is unreachable; sets WARY_RABBIT_URL
	server := os.Getenv(rabbit.ServerURLEnv)
	conn, err := amqp.Dial(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := unique("wary-hand")
	if err := ch.ExchangeDeclare(name+".dlx", amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{
		amqp.QueueTypeArg: amqp.QueueTypeQuorum, "x-delivery-limit": int64(4), "x-dead-letter-exchange": name + ".dlx"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name+".dlx", false, false)
	})
	w := newWary(t)
	w.env[cli.EnvRabbit] = server
	r := w.want(cli.ExitOK, "probe", "rabbit://"+name, "--only", "delivery-limit-dead-letters")
	r.has(t, "your entity "+name+" (read only", "read from quorum queue "+name, "copied: delivery limit 5 (native); dead-letter target yes",
		"limit 5 (native)", "every observation matches the declaration")
	// The lock's bound, which no interface shows, is unknown on both.
	r.has(t, "lock=unknown extend=false", "lock timeout unknown (not read from the broker; declared held until settled)", "UNKNOWN lock timeout: RabbitMQ closes the channel")
	// nothing was published to or left in the user's queue
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil || q.Messages != 0 || q.Consumers != 0 {
		t.Errorf("the user's queue: %+v, %v; want it untouched", q, err)
	}
}

// TestProbeRabbitNoEntity: a name that is not on the broker is said so,
// and the probe's own settings are used, stated as such.
func TestProbeRabbitNoEntity(t *testing.T) {
	rabbitTopology(t)
	w := newWary(t)
	w.env[cli.EnvRabbit] = os.Getenv(rabbit.ServerURLEnv)
	r := w.want(cli.ExitOK, "probe", "rabbit://"+unique("absent"), "--only", "delivery-limit-dead-letters")
	r.has(t, ": not read (", "with the probe's own settings", "limit 3 (native)")
}

// TestProbeServiceBusCopiesQueue: a queue made by hand with
// MaxDeliveryCount 4 and a 30s lock: the scratch queue copies the limit,
// and its lock is shortened (said so) to keep the run short.
func TestProbeServiceBusCopiesQueue(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{})
	if emu.Real {
		t.Skip("runs on the emulator, whose administration port it names")
	}
	w, admin := newWary(t), emu.AdminEndpoint
	w.env[cli.EnvServiceBus] = emu.ConnectionString
	q := sbemu.CreateQueue(t, emu.AdminClient(t), sbemu.Entity{DeliveryLimit: 4, Lock: 30 * time.Second})
	r := w.want(cli.ExitOK, "probe", "servicebus://"+q, "--servicebus-admin-endpoint", admin, "--only", "delivery-limit-dead-letters")
	r.has(t, "your entity "+q+" (read only", "through the administration API", "copied: delivery limit 4 (native)",
		"not copied: lock timeout: yours 30s, the scratch entities' 5s: shortened to keep the run short",
		"lock timeout shortened from 30s to 5s", "limit 4 (native)", "every observation matches the declaration")
	if strings.Contains(r.out+r.errout, "SharedAccessKey=") {
		t.Errorf("the connection string is printed")
	}
}

// TestProbeSQSCopiesQueue: a FIFO queue made by hand with a
// RedrivePolicy of maxReceiveCount 4: the scratch queue copies it.
func TestProbeSQSCopiesQueue(t *testing.T) {
	srv := fauxqs(t, 3*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := srv.NewClient(t, nil)
	name := unique("wary-hand")
	handFIFO(ctx, t, c, name, 4, map[string]string{"VisibilityTimeout": "30"})
	w := newWary(t)
	w.env[cli.EnvSQS] = srv.Endpoint
	var res probeReport
	w.want(cli.ExitOK, "probe", "sqsfifo://"+name+".fifo?region="+sqsemu.Region+"&dedup_window=3s", "--only", "delivery-limit-dead-letters", "--json").json(t, &res)
	if !res.Entity.Read || !slices.Contains(res.Scratch.Copied, "delivery limit 4 (native)") {
		t.Fatalf("probe --json: %+v, want the queue read and its limit copied", res)
	}
	if len(res.Results) != 1 || res.Results[0].Declared != "limit 4 (native)" || res.Results[0].Outcome != "kept" {
		t.Errorf("results: %+v", res.Results)
	}
	shortened := false
	for _, n := range res.Scratch.NotCopied {
		shortened = shortened || (n.Setting == "lock timeout" && n.Yours == "30s" && strings.HasPrefix(n.Why, "shortened"))
	}
	if !shortened {
		t.Errorf("not copied: %+v, want the lock said shortened from 30s", res.Scratch.NotCopied)
	}
}
