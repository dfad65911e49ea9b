//go:build !postgres

package main

import (
	"context"
	"io"
)

// runPostgres is postgres.go's, left out of this build.
func runPostgres(context.Context, io.Writer, string, *brokers) (Report, error) {
	return Report{}, needsTag("postgres", "-postgres URL")
}
