package conformance

import (
	"slices"
	"testing"
)

func TestHistoryCheck(t *testing.T) {
	h := NewHistory()
	h.Sent("a", "b", "c", "d")
	h.MaybeSent("m1", "m2")
	h.Delivered("a", "a", "b", "c", "m1", "x")
	h.Applied("a", "b", "b", "m1")
	r := h.Check()
	if r.Valid() {
		t.Fatalf("report with losses and duplicates is valid: %s", r)
	}
	want := map[string][]string{
		"lost":       {"c", "d"}, // c delivered but never applied; d never delivered
		"unexpected": {"x"},
		"dup-deliv":  {"a"},
		"dup-effect": {"b"},
		"recovered":  {"m1"},
	}
	got := map[string][]string{"lost": r.Lost, "unexpected": r.Unexpected, "dup-deliv": r.DuplicateDeliveries, "dup-effect": r.DuplicateEffects, "recovered": r.Recovered}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}

func TestHistoryValidWithoutEffects(t *testing.T) {
	h := NewHistory()
	h.Sent("a", "b")
	h.Delivered("a", "b", "b")
	if r := h.Check(); !r.Valid() || len(r.DuplicateDeliveries) != 1 {
		t.Fatalf("duplicate deliveries are allowed: %s", r)
	}
}

func TestOrderLog(t *testing.T) {
	l := NewOrderLog()
	for _, s := range []int{0, 1, 1, 2, 0, 3} { // going back is a redelivery: allowed
		l.Start("k", s)()
	}
	if v := l.FirstDeliveryOrderViolations(); len(v) != 0 {
		t.Fatalf("redelivery flagged as a violation: %v", v)
	}
	l.Start("j", 0)()
	l.Start("j", 2)()
	l.Start("j", 1)()
	if v := l.FirstDeliveryOrderViolations(); len(v) != 1 {
		t.Fatalf("skipping ahead not flagged: %v", v)
	}
	end := l.Start("o", 0)
	l.Start("o", 1)()
	end()
	if o := l.Overlaps(); !slices.Equal(o, []string{"o#1"}) {
		t.Fatalf("overlaps %v", o)
	}
}
