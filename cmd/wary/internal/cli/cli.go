// Package cli implements the wary command's tree. Run executes it in
// process, so tests drive it as the binary would be driven.
package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/redact"
)

// Exit codes.
const (
	ExitOK      = 0 // all is well
	ExitFinding = 1 // the command found something: a misconfiguration, a broken promise, something stuck
	ExitError   = 2 // a usage or connection error
	// ExitDeclined: the operator answered no at a confirmation prompt, so
	// nothing was changed. Not an error, but not the action asked for
	// either: a script can tell it apart from 0 (done) and 2 (failed).
	ExitDeclined = 3
)

// Environment variables that give connection strings when no flag does.
const (
	EnvPostgres   = "WARY_POSTGRES_URL"
	EnvRabbit     = "WARY_RABBIT_URL"
	EnvKafka      = "WARY_KAFKA_BROKERS"
	EnvSQS        = "WARY_SQS_ENDPOINT"
	EnvServiceBus = "WARY_SERVICEBUS_CONNECTION_STRING"
)

// IO is where a run reads confirmations and writes its output.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// Harnesses adds probe harnesses, by URL scheme, to the built-in ones
	// (a test's own driver, say).
	Harnesses map[string]HarnessFunc
}

// errFinding makes Run exit with ExitFinding; the command already printed
// what it found.
var errFinding = errors.New("finding")

// errDeclined makes Run exit with ExitDeclined; confirm already said that
// nothing was done.
var errDeclined = errors.New("declined")

// app is one run's state, shared by the commands.
type app struct {
	io   IO
	json bool
	yes  bool
	in   *bufio.Reader
}

// Run runs the command line args (without the program name) and returns
// the exit code.
func Run(ctx context.Context, args []string, stdio IO) int {
	if stdio.In == nil {
		stdio.In = strings.NewReader("")
	}
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	a := &app{io: stdio, in: bufio.NewReader(stdio.In)}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errFinding):
		return ExitFinding
	case errors.Is(err, errDeclined):
		return ExitDeclined
	}
	fmt.Fprintf(stdio.Err, "wary: %s\n", redactErr(err))
	return ExitError
}

// redactErr renders err without any secret it might quote: URLs,
// keyword/value connection strings, shared access keys.
func redactErr(err error) string { return redact.String(err.Error()) }

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "wary",
		Short: "Operate wary pipelines: explain guarantees, probe brokers, replay what is stuck",
		Long: `wary states a pipeline's end-to-end guarantee, measures a live broker's
promises, and shows and puts back what is stuck: parked messages, outbox
rows and dead letters.

Connection strings come from flags or from the environment:
  WARY_POSTGRES_URL                   PostgreSQL store (--postgres)
  WARY_RABBIT_URL                     RabbitMQ server for rabbit:// URLs
  WARY_KAFKA_BROKERS                  Kafka seed brokers for kafka:// URLs without brokers=
  WARY_SQS_ENDPOINT                   SQS endpoint for sqsfifo:// URLs without endpoint=
  WARY_SERVICEBUS_CONNECTION_STRING   Service Bus namespace for servicebus:// URLs
  WARY_SERVICEBUS_ADMIN_ENDPOINT      an emulator's administration API, where servicebus://
                                      URLs read their entity (and probe makes its entities)
Passwords are never printed.

Exit codes: 0 all is well, 1 something was found (a misconfiguration,
a broken promise, something stuck), 2 a usage or connection error,
3 declined at a confirmation prompt (nothing was changed).`,
		Example: `  wary explain --broker rabbit://orders --subscription 'rabbit://orders.billing?delivery_limit=5&dead_letter_exchange=orders.billing.dlx' --postgres "$WARY_POSTGRES_URL" --consumer billing
  wary parked list --sqlite shop.db
  wary probe 'mem://scratch?profile=sqsfifo'`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, c.CommandPath())
	})
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print data as JSON")
	root.AddCommand(a.explainCmd(), a.parkedCmd(), a.outboxCmd(), a.dlqCmd(), a.probeCmd(), a.topologyCmd(), a.consoleCmd(), a.versionCmd())
	return root
}

// out prints v as JSON with --json, and otherwise calls text.
func (a *app) out(v any, text func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.io.Out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	text(a.io.Out)
	return nil
}

// confirm asks before a destructive action, unless --yes.
func (a *app) confirm(what string) error {
	if a.yes {
		return nil
	}
	fmt.Fprintf(a.io.Err, "%s? [y/N] ", what)
	line, _ := a.in.ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(a.io.Err, "not confirmed: nothing was changed (answer y, or pass --yes)")
	return errDeclined
}

// yesFlag adds --yes to a destructive command.
func (a *app) yesFlag(c *cobra.Command) *cobra.Command {
	c.Flags().BoolVarP(&a.yes, "yes", "y", false, "do not ask for confirmation")
	return c
}

// envDefault returns the flag's value, or the environment variable's.
func (a *app) envDefault(v, env string) string {
	if v != "" {
		return v
	}
	return a.io.Getenv(env)
}

// report prints v as out does, and returns errFinding when found, so that
// the command exits 1.
func (a *app) report(v any, text func(w io.Writer), found bool) error {
	if err := a.out(v, text); err != nil {
		return err
	}
	if found {
		return errFinding
	}
	return nil
}

// table prints a header and n rows, aligned in columns; row returns row
// i's cells.
func table(w io.Writer, header string, n int, row func(i int) []any) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ReplaceAll(header, " | ", "\t"))
	for i := range n {
		cells := row(i)
		for j, c := range cells {
			if j > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
