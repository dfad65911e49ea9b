package idemtest

import (
	"slices"
	"testing"
	"time"

	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/internal/seam"
)

// testClaim: the store's one claim, as the inbox uses it. Claim answers per
// message, in the order asked: New once, then a duplicate; Held for a new
// message whose aggregate has a parked message, and only when its
// aggregate was given. BeginClaim claims as Claim does, and begins nothing
// only when it claimed nothing.
func testClaim[Tx any](t *testing.T, f Factory[Tx]) {
	e := Setup(t, f, "")
	now := time.Now()
	e.InTx(func(tx Tx) error {
		return e.Driver.Park(e.Ctx, tx, &idem.Parked{Consumer: "c", MessageID: "p", AggregateID: "a", Version: 1,
			Body: []byte("x"), Reason: "test", FirstSeen: now, LastSeen: now})
	})
	claim := func(tx Tx, ids, aggs []string) []seam.Claimed {
		t.Helper()
		got, err := e.Driver.Claim(e.Ctx, tx, seam.ClaimRequest{Consumer: "c", IDs: ids, Aggregates: aggs, At: now})
		if err != nil {
			t.Fatalf("Claim(%v, %v): %v", ids, aggs, err)
		}
		return got
	}
	e.InTx(func(tx Tx) error {
		got := claim(tx, []string{"m1", "m2", "m3"}, []string{"a", "", "b"})
		if want := []seam.Claimed{{New: true, Held: true}, {New: true}, {New: true}}; !slices.Equal(got, want) {
			t.Errorf("first claim: %+v, want %+v", got, want)
		}
		if got := claim(tx, []string{"m9"}, nil); !slices.Equal(got, []seam.Claimed{{New: true}}) {
			t.Errorf("a claim without aggregates: %+v, want new", got)
		}
		if got := claim(tx, []string{"m8"}, []string{"a"}); !slices.Equal(got, []seam.Claimed{{New: true, Held: true}}) {
			t.Errorf("one message of a parked aggregate: %+v, want new and held", got)
		}
		return nil
	})
	e.InTx(func(tx Tx) error {
		got := claim(tx, []string{"m1", "m4", "m5"}, []string{"a", "a", "a"})
		if want := []seam.Claimed{{}, {New: true, Held: true}, {New: true, Held: true}}; !slices.Equal(got, want) {
			t.Errorf("second claim: %+v, want %+v (m1 a duplicate, never held)", got, want)
		}
		return nil
	})

	tx, began, got, err := e.Driver.BeginClaim(e.Ctx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m2"}, At: now})
	switch {
	case err != nil:
		t.Fatalf("BeginClaim of a duplicate: %v", err)
	case began:
		if !slices.Equal(got, []seam.Claimed{{}}) {
			t.Errorf("BeginClaim of a duplicate: %+v, want not new", got)
		}
		if err := e.Driver.Rollback(e.Ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	tx, began, got, err = e.Driver.BeginClaim(e.Ctx, seam.ClaimRequest{Consumer: "c", IDs: []string{"m6", "m7"}, Aggregates: []string{"", "a"}, At: now})
	if err != nil || !began {
		t.Fatalf("BeginClaim of new messages: began %v, %v", began, err)
	}
	if want := []seam.Claimed{{New: true}, {New: true, Held: true}}; !slices.Equal(got, want) {
		t.Errorf("BeginClaim: %+v, want %+v", got, want)
	}
	if err := e.Driver.Rollback(e.Ctx, tx); err != nil {
		t.Fatal(err)
	}
	e.InTx(func(tx Tx) error {
		if got := claim(tx, []string{"m6"}, nil); !slices.Equal(got, []seam.Claimed{{New: true}}) {
			t.Errorf("after BeginClaim rolled back: %+v, want new", got)
		}
		return nil
	})
}
