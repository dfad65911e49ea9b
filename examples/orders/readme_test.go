package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEBillingHandler: docs/testing.md (the README's guide to the test kit) shows
// TestBillingHandler as it is.
func TestREADMEBillingHandler(t *testing.T) {
	readme, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- testing your handler: kept in sync by examples/orders TestREADMEBillingHandler -->\n```go\n"
	_, block, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("docs/testing.md lacks %q", marker)
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
		t.Fatalf("docs/testing.md shows\n%s\nbilling_test.go has\n%s", block, fn)
	}
}
