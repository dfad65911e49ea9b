package idem

import (
	"github.com/wary-go/wary/idem/store"
)

// Conversions between the types of this package and the stores' (package
// idem/store), at the boundary between the two. The struct types whose
// fields are all of basic types convert directly (Parked(p)).

func parkedList(ps []store.Parked) []Parked {
	out := make([]Parked, len(ps))
	for i, p := range ps {
		out[i] = Parked(p)
	}
	return out
}

func versionCheck(c store.VersionCheck) VersionCheck {
	return VersionCheck{Result: VersionResult(c.Result), Current: c.Current}
}
