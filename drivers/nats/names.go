package nats

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wary-go/wary/broker/driver"
)

// MaxNameLen is the longest stream or consumer name the driver opens: the
// server keeps them as file names.
const MaxNameLen = 255

// validName checks a stream or consumer name as JetStream does: no
// whitespace, ".", "*", ">", path separators or control characters.
func validName(kind, name string) error {
	switch {
	case name == "":
		return driver.OpenError(driver.Invalid, fmt.Errorf("nats: no %s name", kind))
	case len(name) > MaxNameLen:
		return driver.OpenError(driver.Invalid, fmt.Errorf("nats: %s name of %d bytes is over %d", kind, len(name), MaxNameLen))
	case strings.ContainsAny(name, ".*>/\\") || hasSpaceOrControl(name):
		return driver.OpenError(driver.Invalid, fmt.Errorf("nats: %s name %q holds a character JetStream does not allow in names (whitespace, '.', '*', '>', '/', '\\' or a control character)", kind, name))
	}
	return nil
}

// validSubject checks a literal subject to publish to: tokens separated by
// ".", none empty, none a wildcard, no whitespace.
func validSubject(s string) error {
	if err := validTokens(s); err != nil {
		return driver.OpenError(driver.Invalid, fmt.Errorf("nats: subject %q: %w", s, err))
	}
	return nil
}

// validKey checks a Message.Key, which is the subject's last tokens.
func validKey(k string) error {
	if len(k) > MaxKeyLen {
		return fmt.Errorf("key of %d bytes is over the driver's limit of %d (it is a part of the subject)", len(k), MaxKeyLen)
	}
	if err := validTokens(k); err != nil {
		return fmt.Errorf("key %q cannot be a part of a subject: %w", k, err)
	}
	return nil
}

func validTokens(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if hasSpaceOrControl(s) {
		return errors.New("holds whitespace or a control character")
	}
	for _, t := range strings.Split(s, ".") {
		switch t {
		case "":
			return errors.New("holds an empty token (a leading, trailing or doubled '.')")
		case "*", ">":
			return fmt.Errorf("holds the wildcard token %q", t)
		}
	}
	return nil
}

func hasSpaceOrControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

// validHeaderName checks a header name NATS carries unchanged: no ':',
// whitespace or control character, and not one of NATS's own (Nats-...),
// which the server acts on.
func validHeaderName(k string) error {
	switch {
	case k == "":
		return errors.New("empty header name")
	case strings.Contains(k, ":") || hasSpaceOrControl(k):
		return errors.New("a NATS header name holds no ':', whitespace or control character")
	case len(k) >= 5 && strings.EqualFold(k[:5], "nats-"):
		return errors.New("names starting with \"Nats-\" are NATS's own: the server acts on them")
	}
	return nil
}

// validHeaderValue checks a header value NATS carries unchanged: no CR or
// LF (they end the header line), and no leading or trailing whitespace
// (the header parser trims it).
func validHeaderValue(v string) error {
	switch {
	case strings.ContainsAny(v, "\r\n"):
		return errors.New("a NATS header value holds no CR or LF")
	case v != strings.TrimSpace(v):
		return errors.New("a NATS header value has no leading or trailing whitespace (NATS trims it)")
	}
	return nil
}
