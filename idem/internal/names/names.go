// Package names is the one home of the rules for the names wary's stores
// put into SQL (consumers, providers, table prefixes, tables and columns)
// and for idempotency keys: idem, idem/keys and the SQL stores call it, and
// idem re-exports ErrInvalidName and MaxNameLen, idem/keys MaxKeyLen.
package names

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest name, in bytes, accepted for a consumer, a table
// prefix or a composed table name. PostgreSQL silently cuts identifiers at 63
// bytes, so two longer names could collide; they are rejected instead.
const MaxNameLen = 63

// ErrInvalidName matches every error returned for a consumer name, table
// prefix, table or column name that is not accepted.
var ErrInvalidName = errors.New("idem: invalid name")

type nameError struct {
	what, name, why string
}

func (e *nameError) Error() string {
	return fmt.Sprintf("idem: invalid %s %q: %s", e.what, e.name, e.why)
}

func (e *nameError) Is(target error) bool { return target == ErrInvalidName }

// ValidateIdentifier checks one SQL identifier (a table, column or schema
// name, or a table prefix without the trailing part): 1 to 63 bytes of ASCII
// letters, digits and underscores, not starting with a digit. Identifiers are
// also quoted wherever they are used; the check keeps names portable and
// makes injection impossible rather than merely escaped.
func ValidateIdentifier(what, s string) error {
	return validate(what, s, false)
}

// ValidateConsumer checks a consumer name: 1 to 63 bytes of ASCII letters,
// digits and the characters "_", "-", "." and ":". Quotes, semicolons, NUL,
// spaces and other characters are rejected.
func ValidateConsumer(s string) error {
	return validate("consumer name", s, true)
}

// ValidateProvider checks an idempotency-key provider name, with the rules
// of ValidateConsumer.
func ValidateProvider(s string) error {
	return validate("provider name", s, true)
}

func validate(what, s string, consumer bool) error {
	switch {
	case s == "":
		return &nameError{what, s, "empty"}
	case len(s) > MaxNameLen:
		return &nameError{what, s, fmt.Sprintf("%d bytes, longer than %d", len(s), MaxNameLen)}
	case !utf8.ValidString(s):
		return &nameError{what, s, "not valid UTF-8"}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
		if consumer {
			ok = ok || c == '-' || c == '.' || c == ':'
		} else if i == 0 && '0' <= c && c <= '9' {
			return &nameError{what, s, "starts with a digit"}
		}
		if !ok {
			return &nameError{what, s, fmt.Sprintf("character %q at byte %d is not allowed", rune(c), i)}
		}
	}
	return nil
}

// ValidatePrefix checks a table prefix: empty, or an identifier (see
// ValidateIdentifier) short enough that every table name built from it fits
// in 63 bytes.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidateIdentifier("table prefix", prefix); err != nil {
		return err
	}
	if n := len(prefix) + len(longestSuffix); n > MaxNameLen {
		return &nameError{"table prefix", prefix, fmt.Sprintf("table %q would be %d bytes, longer than %d", prefix+longestSuffix, n, MaxNameLen)}
	}
	return nil
}

// longestSuffix is the longest name the stores append to a prefix.
const longestSuffix = "parked_aggregate_idx"

// ValidateTableName checks a table name as written by a user: an
// identifier, optionally qualified by a schema ("schema.table"). It returns
// the parts.
func ValidateTableName(name string) ([]string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, &nameError{"table name", name, "more than one dot"}
	}
	for _, p := range parts {
		if err := ValidateIdentifier("table name", p); err != nil {
			return nil, &nameError{"table name", name, err.(*nameError).why}
		}
	}
	return parts, nil
}

// QuoteIdentifier quotes one identifier part in the SQL standard way shared
// by PostgreSQL and SQLite: in double quotes, with double quotes doubled and
// NUL removed. Stores use it (or an equivalent) on names already validated.
func QuoteIdentifier(s string) string {
	s = strings.ReplaceAll(s, "\x00", "")
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// MaxKeyLen is the longest idempotency key accepted (Stripe's limit).
const MaxKeyLen = 255

// ValidateKey checks an idempotency key: 1 to 255 bytes of printable ASCII
// without spaces.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return &nameError{"idempotency key", key, fmt.Sprintf("length %d, want 1 to %d bytes", len(key), MaxKeyLen)}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return &nameError{"idempotency key", key, fmt.Sprintf("character %q at byte %d is not printable ASCII", rune(c), i)}
		}
	}
	return nil
}
