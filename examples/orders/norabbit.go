//go:build !rabbit

package main

import (
	"context"
	"net/url"
)

// openRabbit is rabbit.go's, left out of this build.
func openRabbit(_ context.Context, u *url.URL, _ string) (string, func(), error) {
	return "", nil, needsTag("rabbit", "-broker "+u.Scheme+"://…")
}
