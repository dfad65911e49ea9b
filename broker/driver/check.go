package driver

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wary-go/wary/broker/internal/text"
)

// MaxIDLen is the longest message ID, in bytes, that broker.Topic.Publish accepts.
// Stores key their inbox records by it, and an index entry must stay well
// under PostgreSQL's B-tree limit (about 2.7 KB).
const MaxIDLen = 1024

// ValidateID checks a message ID against the rules every wary component
// shares: 1 to MaxIDLen bytes of valid UTF-8 without control characters
// (NUL, newlines, DEL and the C1 range), and not only white space
// (unicode.IsSpace: spaces, U+00A0, U+3000, ...), which no one can tell
// from an empty ID. broker.Topic.Publish enforces them (after giving an empty ID a
// random one); a consumer that receives a message from another producer
// can check them before storing the ID (package idem does), and the
// outbox before it writes a row (package idem/outbox). The error matches
// ErrInvalid.
func ValidateID(id string) error {
	switch {
	case id == "":
		return invalidf("id", "message ID is empty")
	case len(id) > MaxIDLen:
		return invalidf("id", "message ID is %d bytes, over the limit of %d", len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return invalidf("id", "message ID is not valid UTF-8")
	}
	blank := true
	for _, r := range id {
		if unicode.IsControl(r) {
			return invalidf("id", "message ID holds the control character %U", r)
		}
		blank = blank && unicode.IsSpace(r)
	}
	if blank {
		return invalidf("id", "message ID is only white space")
	}
	return nil
}

// ValidateHeaders checks application headers against the rules broker.Topic.Publish
// enforces: names not empty, names and values valid UTF-8, and no name
// reserved for wary (ReservedHeader), no name twice. The outbox checks a
// message's headers with it before it writes a row (package idem/outbox).
// The error matches ErrInvalid.
func ValidateHeaders(h Headers) error {
	var seen map[string]struct{} // past a few headers, instead of a scan
	if len(h) > 16 {
		seen = make(map[string]struct{}, len(h))
	}
	for i, p := range h {
		k, v := p[0], p[1]
		twice := false
		if seen != nil {
			_, twice = seen[k]
			seen[k] = struct{}{}
		} else {
			twice = slices.ContainsFunc(h[:i], func(q [2]string) bool { return q[0] == k })
		}
		switch {
		case twice:
			return invalidf("headers", "header %q is set twice", k)
		case k == "" || !utf8.ValidString(k):
			return invalidf("headers", "header name %q is empty or not valid UTF-8", k)
		case ReservedHeader(k):
			return invalidf("headers", "header %q is reserved (names starting with \"wary-\" are set by wary and its drivers)", k)
		case !utf8.ValidString(v):
			return invalidf("headers", "header %q has a value that is not valid UTF-8", k)
		}
	}
	return nil
}

// ReservedHeader reports whether a producer may not set the header name:
// it starts with "wary-" in any case and is not one of the headers a
// producer may set: package broker's event-identity headers
// (broker.HeaderAggregateID, ...), broker.HeaderContentType and
// HeaderReplayedBy.
func ReservedHeader(name string) bool {
	if len(name) < 5 || !strings.EqualFold(name[:5], "wary-") {
		return false
	}
	switch name {
	case "wary-aggregate-id", "wary-aggregate-version", "wary-sequence", "wary-type", // broker.HeaderAggregateID, ...
		HeaderReplayedBy, "wary-content-type": // broker.HeaderContentType
		return false
	}
	return true
}

// HeaderReplayedBy records, on a message an operator moved back from a
// dead-letter queue or a park (cmd/wary), who did it, when, and why the
// message had been set aside ("alice@host 2026-12-01T03:12:00Z:
// delivery_limit"). A producer may set it (ReservedHeader).
const HeaderReplayedBy = "wary-replayed-by"

// MaxReasonLen bounds, in bytes, the reason a dead letter carries in
// HeaderDeadLetterReason and the reason a message is parked with (package
// idem): see BoundReason.
const MaxReasonLen = 1024

// BoundReason returns s as a dead-letter or park reason: one line of
// printable text of at most MaxReasonLen bytes. Control characters,
// other characters that do not print, and bytes that are not UTF-8 are
// escaped as Go escapes them ("\n", "\x00", "\u2028"); a longer text is
// cut on a character boundary and ends in "…(N bytes cut)", N counting the
// bytes of s left out. broker.Delivery.DeadLetter applies it to its reason, so
// every driver gets it; it leaves a bounded reason as it is.
func BoundReason(s string) string {
	return text.Bound(s, MaxReasonLen)
}

func invalidf(op, format string, args ...any) error {
	return &Error{Op: op, Code: Invalid, Err: fmt.Errorf(format, args...)}
}
