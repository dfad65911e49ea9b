// Package text holds the bounding and quoting of foreign text that
// broker and broker/driver share: reasons, values quoted in errors, and
// url.Parse's failures without what they quote.
package text

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bound returns s as one line of printable text of at most n bytes:
// control characters, other characters that do not print, and bytes that
// are not UTF-8 are escaped as Go escapes them ("\n", "\x00",
// "\u2028"); a longer text is cut on a character boundary and ends in
// "…(N bytes cut)", N counting the bytes of s left out. A bounded s is
// returned as it is.
func Bound(s string, n int) string {
	if len(s) <= n && printable(s) {
		return s
	}
	limit := n - len(cutMarker(len(s))) // room for the text when it is cut
	var b strings.Builder
	shownIn, shownOut := 0, 0 // the input and output at the last cut that leaves room for the marker
	for i := 0; i < len(s); {
		piece, size := escapeAt(s, i)
		if b.Len()+len(piece) > n {
			return b.String()[:shownOut] + cutMarker(len(s)-shownIn)
		}
		b.WriteString(piece)
		i += size
		if b.Len() <= limit {
			shownIn, shownOut = i, b.Len()
		}
	}
	return b.String()
}

func cutMarker(n int) string { return fmt.Sprintf("…(%d bytes cut)", n) }

// printable reports whether s is valid UTF-8 of printable characters and
// spaces only.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// escapeAt returns the character at s[i], escaped unless it prints, and
// its size in s.
func escapeAt(s string, i int) (string, int) {
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Sprintf(`\x%02x`, s[i]), 1
	case strconv.IsPrint(r):
		return s[i : i+size], size
	}
	q := strconv.QuoteRune(r) // '\n', '\x00', '\u2028'
	return q[1 : len(q)-1], size
}

// Shown is a foreign value (a content type, a message ID) as an error
// shows it: quoted, escaped, and cut to 64 bytes.
func Shown(v string) string {
	const show = 64
	if len(v) <= show {
		return strconv.Quote(v)
	}
	n := show
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return fmt.Sprintf("%s…(%d bytes)", strconv.Quote(v[:n]), len(v))
}

// URLFailure is url.Parse's error without the text it quotes.
func URLFailure(err error) string {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return quoted.ReplaceAllString(err.Error(), `"…"`)
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
