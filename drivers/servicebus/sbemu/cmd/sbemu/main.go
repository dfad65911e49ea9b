// Command sbemu runs wary's Azure Service Bus emulator for a person, until
// stopped:
//
//	go -C drivers/servicebus run ./sbemu/cmd/sbemu -queue orders -topic events/audit
//
// It starts the emulator as the tests do (package sbemu: the Node program
// in drivers/servicebus/sbemu/emulator, whose one dependency, rhea, npm ci
// installs there on the first run, which it says), bound to 127.0.0.1
// only, with the queues, session queues, topics and subscriptions the flags
// name; prints the connection string (UseDevelopmentEmulator=true), the
// administration endpoint (where the driver reads the entities' settings)
// and the servicebus:// URLs to use, plain ones, then a line
// "ready", and runs until SIGINT or SIGTERM. Everything is in memory: a
// restart starts empty.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "sbemu: %v\n", err)
		os.Exit(1)
	}
}

// names is a repeatable flag of entity names.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }
func (n *names) Set(s string) error {
	if s == "" {
		return errors.New("empty name")
	}
	*n = append(*n, s)
	return nil
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbemu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var queues, sessionQueues, subs, sessionSubs names
	fs.Var(&queues, "queue", "create the queue `NAME`; repeat for more")
	fs.Var(&sessionQueues, "session-queue", "create the session-enabled queue `NAME`")
	fs.Var(&subs, "topic", "create the topic and its subscription `TOPIC/SUBSCRIPTION`")
	fs.Var(&sessionSubs, "session-topic", "create the topic and its session-enabled subscription `TOPIC/SUBSCRIPTION`")
	lock := fs.Duration("lock", 30*time.Second, "lock duration of every queue and subscription")
	maxDelivery := fs.Int("max-delivery", 10, "MaxDeliveryCount of every queue and subscription (then the dead-letter queue)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sbemu [-queue NAME]... [-session-queue NAME]... [-topic TOPIC/SUB]... [-session-topic TOPIC/SUB]... [-lock D] [-max-delivery N]\n\n"+
			"Runs wary's Service Bus emulator on 127.0.0.1 until SIGINT or SIGTERM and prints what to use.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	if *lock <= 0 || *maxDelivery <= 0 {
		return errors.New("-lock and -max-delivery must be positive")
	}

	var top sbemu.Topology
	var urls []string
	// The URLs are plain: the driver reads each entity's settings through
	// the administration endpoint the export line names.
	for _, q := range queues {
		top.Queues = append(top.Queues, sbemu.Queue{Name: q, LockDuration: *lock, MaxDeliveryCount: int32(*maxDelivery)})
		urls = append(urls, "queue servicebus://"+q)
	}
	for _, q := range sessionQueues {
		top.Queues = append(top.Queues, sbemu.Queue{Name: q, RequiresSession: true, LockDuration: *lock, MaxDeliveryCount: int32(*maxDelivery)})
		urls = append(urls, "session queue servicebus://"+q)
	}
	topics := map[string]int{}
	for i, list := range []names{subs, sessionSubs} {
		for _, ts := range list {
			t, s, ok := strings.Cut(ts, "/")
			if !ok || t == "" || s == "" {
				return fmt.Errorf("-topic %q: want TOPIC/SUBSCRIPTION", ts)
			}
			sessions := i == 1
			j, seen := topics[strings.ToLower(t)]
			if !seen {
				j = len(top.Topics)
				topics[strings.ToLower(t)] = j
				top.Topics = append(top.Topics, sbemu.Topic{Name: t})
				// whether a topic's subscriptions require sessions (and so
				// a key) is theirs: it is declared to the topic
				tu := "topic servicebus://" + t
				if sessions {
					tu += "?sessions=true"
				}
				urls = append(urls, tu)
			}
			top.Topics[j].Subscriptions = append(top.Topics[j].Subscriptions, sbemu.Subscription{Name: s, RequiresSession: sessions,
				LockDuration: *lock, MaxDeliveryCount: int32(*maxDelivery)})
			urls = append(urls, fmt.Sprintf("subscription servicebus://%s/Subscriptions/%s", t, s))
		}
	}

	if dir, err := sbemu.Dir(); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
			fmt.Fprintf(stderr, "sbemu: first run: npm ci in %s (rhea, from its lockfile)\n", dir)
		}
	}
	emu, stop, err := sbemu.Launch(top)
	if err != nil {
		return err
	}
	defer stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)

	fmt.Fprintf(stdout, "Service Bus emulator: AMQP on 127.0.0.1:%d, administration API on %s\n", emu.Port, emu.AdminEndpoint)
	fmt.Fprintf(stdout, "export %s='%s' %s=%s\n", sbemu.EnvConnectionString, emu.ConnectionString, sbemu.EnvAdminEndpoint, emu.AdminEndpoint)
	for _, u := range urls {
		fmt.Fprintln(stdout, u)
	}
	fmt.Fprintln(stdout, "ready (stop with Ctrl-C)")
	s := <-sig
	fmt.Fprintf(stderr, "sbemu: %v: stopping\n", s)
	return nil
}
