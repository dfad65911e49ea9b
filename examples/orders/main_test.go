package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	rep, err := run(t.Context(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("report not OK: %+v", rep)
	}
	h := rep.History
	if h.Sent != 2*orders || h.Delivered != 2*orders || h.Applied != 2*orders || len(h.DuplicateDeliveries) == 0 {
		t.Errorf("history %s: want %d sent, delivered and applied, with duplicate deliveries", h, 2*orders)
	}
	if rep.Duplicates != int64(len(h.DuplicateDeliveries)) {
		t.Errorf("inbox dropped %d duplicates, history shows %d", rep.Duplicates, len(h.DuplicateDeliveries))
	}
	if rep.ProviderCalls != orders+1 {
		t.Errorf("provider calls %d, want %d (one retry with the same key)", rep.ProviderCalls, orders+1)
	}
	if !strings.Contains(out.String(), "result:    OK") {
		t.Errorf("output does not end with OK")
	}
}
