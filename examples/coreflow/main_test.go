package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestRun: the program commits an order with its event, relays it, applies
// it once and drops the copy.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	const want = `relay published 1 <nil>
order-1/placed version 1 applied <nil>
order-1/placed version 1 duplicate <nil>
invoices 1
`
	if out.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", out.String(), want)
	}
}

// TestREADME: the README's core-flow program is this file, byte for byte.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- core flow: kept in sync by examples/coreflow TestREADME -->\n```go\n"
	_, block, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md lacks %q", marker)
	}
	block, _, _ = strings.Cut(block, "```\n")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(src) {
		t.Fatalf("README.md shows\n%s\nmain.go is\n%s", block, src)
	}
}
