// Package seam lets broker/topology reach two things package broker keeps
// unexported: the openers a URLMux holds for a URL's scheme, and the
// making of a *broker.Error. Package broker sets both when it is
// initialised, which is before any importer of broker/topology runs.
package seam

import "net/url"

var (
	// Openers parses urlstr and returns the subscription and topic
	// openers that m, a *broker.URLMux, holds for its scheme (nil where
	// it holds none). A URL that does not parse, or a scheme with neither,
	// is an error matching broker.ErrInvalid.
	Openers func(m any, urlstr string) (u *url.URL, sub, topic any, err error)
	// Error returns err as a *broker.Error of op, of err's class (none
	// when nothing in err says one).
	Error func(op string, err error) error
)
