// Command fauxqs runs the fauxqs SQS emulator for a person, until stopped:
//
//	go -C drivers/sqsfifo run ./sqsemu/cmd/fauxqs -queue orders -max-receive 5
//
// It starts fauxqs as the tests do (package sqsemu: the fauxqs and Node 22
// of the lockfile in drivers/sqsfifo/sqsemu, installed there with npm ci
// on the first run, which it says), bound to 127.0.0.1 only, creates the
// FIFO queues the flags name (each with a dead-letter queue when
// -max-receive is set), prints the environment and the sqsfifo:// URLs to
// use, then a line "ready", and runs until SIGINT or SIGTERM. Everything
// is in memory: a restart starts empty.
package main

import (
	"context"
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

	"github.com/wary-go/wary/drivers/sqsfifo/sqsemu"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "fauxqs: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fauxqs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var queues []string
	fs.Func("queue", "create the FIFO queue `NAME` (.fifo is added); repeat for more", func(s string) error {
		if s == "" {
			return errors.New("empty queue name")
		}
		queues = append(queues, s)
		return nil
	})
	maxReceive := fs.Int("max-receive", 0, "give each queue a dead-letter queue NAME-dlq.fifo after this many receives (0: none)")
	visibility := fs.Duration("visibility", 0, "each queue's visibility timeout (0: SQS's 30s)")
	dedup := fs.Duration("dedup-window", 0, "shorten the 5-minute deduplication window of the queues (0: keep it)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fauxqs [-queue NAME]... [-max-receive N] [-visibility D] [-dedup-window D]\n\n"+
			"Runs the fauxqs SQS emulator on 127.0.0.1 until SIGINT or SIGTERM and prints what to use.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}

	if dir, err := sqsemu.Dir(); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
			fmt.Fprintf(stderr, "fauxqs: first run: npm ci in %s (fauxqs and Node 22 from its lockfile)\n", dir)
		}
	}
	srv, stop, err := sqsemu.LaunchFauxqs(sqsemu.Options{DedupWindow: *dedup})
	if err != nil {
		return err
	}
	defer stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := srv.Client(ctx, nil)
	if err != nil {
		return err
	}
	spec := sqsemu.QueueSpec{MaxReceive: *maxReceive, Visibility: *visibility}
	q := "endpoint=" + srv.Endpoint + "&region=" + sqsemu.Region
	fmt.Fprintf(stdout, "fauxqs (SQS) on %s\n", srv.Endpoint)
	fmt.Fprintf(stdout, "export WARY_SQS_ENDPOINT=%s AWS_REGION=%s AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test\n", srv.Endpoint, sqsemu.Region)
	for _, name := range queues {
		_, dlq, err := sqsemu.CreateNamedQueue(ctx, client, name, spec)
		if err != nil {
			return fmt.Errorf("queue %s: %w", name, err)
		}
		name = strings.TrimSuffix(name, ".fifo") + ".fifo"
		fmt.Fprintf(stdout, "queue sqsfifo://%s?%s\n", name, q)
		if dlq != "" {
			fmt.Fprintf(stdout, "dead-letter queue sqsfifo://%s?%s (after %d receives)\n", strings.TrimSuffix(name, ".fifo")+"-dlq.fifo", q, *maxReceive)
		}
	}
	fmt.Fprintln(stdout, "ready (stop with Ctrl-C)")
	s := <-sig
	fmt.Fprintf(stderr, "fauxqs: %v: stopping\n", s)
	return nil
}
