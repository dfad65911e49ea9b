//go:build !trace

package main

import (
	"context"
	"io"
)

// traced is trace.go's, left out of this build: -trace needs the
// OpenTelemetry SDK.
type traced struct{}

func installTracing() (*traced, error) { return nil, needsTag("trace", "-trace") }

func (*traced) print(context.Context, io.Writer, string) error { return nil }
