package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := `evt-1      acct-A v1 attempt 1: applied: version checked, applied
evt-2      acct-A v2 attempt 1: applied: version checked, applied
evt-2      acct-A v2 attempt 1: duplicate: acknowledged, handler not run
evt-3      acct-B v1 attempt 1: applied: version checked, applied
evt-4      acct-A v3 attempt 1: applied: version checked, applied
evt-9      acct-A v2 attempt 1: stale: acknowledged, not applied
evt-6      acct-B v3 attempt 1: gap retried: retried later
evt-6      acct-B v3 attempt 2: parked: gap still open after 2 attempts
evt-5      acct-B v2 attempt 1: held: parked behind the aggregate's parked event
parked     acct-B v2 (evt-5): held behind a parked message of aggregate acct-B
parked     acct-B v3 (evt-6): gap: aggregate "acct-B" at version 1, event version 3
replay     acct-B: 2 replayed, 0 still parked
account    acct-A: version 3, balance 115
account    acct-B: version 3, balance 77
stats      applied 6, duplicates 1, stale 1, parked 2 (held 1), replayed 2
`
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}
