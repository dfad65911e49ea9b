package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEBillingHandler: the README's "Testing your handler" shows
// TestBillingHandler as it is.
func TestREADMEBillingHandler(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- testing your handler: kept in sync by examples/orders TestREADMEBillingHandler -->\n```go\n"
	_, block, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md lacks %q", marker)
	}
	block, _, _ = strings.Cut(block, "```")
	src, err := os.ReadFile("billing_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, _ := strings.Cut(string(src), "\nfunc TestBillingHandler(")
	fn, _, _ = strings.Cut(fn, "\n}\n")
	fn = "func TestBillingHandler(" + fn + "\n}\n"
	if block != fn {
		t.Fatalf("README.md shows\n%s\nbilling_test.go has\n%s", block, fn)
	}
}
