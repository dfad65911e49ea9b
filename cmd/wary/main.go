// Command wary is the operator's command for wary pipelines: it states a
// pipeline's end-to-end guarantee (explain), measures a live broker's
// promises (probe), declares what a URL describes (topology), shows and
// puts back what is stuck (parked messages, outbox rows, dead letters),
// and serves all of it as a web page (console).
//
// Install it from a clone with
//
//	go -C cmd/wary install .
//
// (its go.mod points at the repository's other modules with replace
// directives, which "go install …@version" refuses) and run "wary --help". Exit codes: 0 when all is well, 1 when the
// command found something (a misconfiguration, a broken promise, parked
// messages), 2 for a usage or connection error, 3 when the operator
// answered no at a confirmation prompt (nothing was changed).
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/wary-go/wary/cmd/wary/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Run(ctx, os.Args[1:], cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
