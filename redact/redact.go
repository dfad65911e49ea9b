// Package redact hides the secrets in URLs, connection strings and the
// texts that quote them (error messages), for logs and errors: wary and
// its drivers show every URL and connection string through it.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

const redacted = "xxxxx"

// URL returns u as a string for logs and errors, with every secret
// replaced by "xxxxx": the password (also in the opaque form
// "amqp:user:pass@host"), the value of every query parameter whose name
// suggests a secret (password, pass, pwd, secret, token, auth, credential,
// key, sig, sas and the like), every query pair that cannot be parsed
// (it could be any of those), and the fragment.
func URL(u *url.URL) string {
	if strings.Contains(u.RawQuery+u.EscapedFragment(), "@") || (u.Opaque == "" && strings.Contains(u.EscapedPath(), "@")) {
		// "amqp://guest:1234/pw@host/" parses as host "guest:1234" and
		// path "/pw@host/", "amqp:guest:p?w@host" as opaque "guest:p" and
		// query "w@host": a password holding "/", "?" or "#" that was not
		// escaped. Redact as if everything up to the "@" were userinfo.
		return redactRaw(u.String())
	}
	c := *u
	if c.User != nil {
		if _, has := c.User.Password(); has {
			c.User = url.UserPassword(c.User.Username(), redacted)
		}
	}
	if c.Opaque != "" {
		c.Opaque = redactOpaque(c.Opaque)
	}
	c.RawQuery = redactQuery(c.RawQuery)
	c.Fragment, c.RawFragment = "", ""
	out := c.String()
	if u.Fragment != "" || u.RawFragment != "" {
		out += "#" + redacted
	}
	return out
}

// String returns s for logs and errors with every secret it
// recognises replaced by "xxxxx". s may be:
//   - a URL, which may not parse (as URL; userinfo before the last "@" of
//     the authority and secret query values are hidden even then);
//   - a URL whose userinfo holds white space or quotes, or whose scheme is
//     missing or not a valid one ("://user:p w@host", "x_y://...",
//     "amqp:user:p w@host"), alone or in text: everything from the first
//     URL's "//" (or its opaque body) up to the last "@" of s is taken as
//     userinfo, and only a user name before its first ":" is kept;
//   - a keyword/value connection string, separated by spaces or ";":
//     PostgreSQL's "host=h user=u password='p w'" (quoted values and
//     backslash escapes as libpq reads them), Service Bus's
//     "Endpoint=sb://ns/;SharedAccessKeyName=n;SharedAccessKey=k";
//   - a go-sql-driver/mysql DSN, "user:password@tcp(host:3306)/db"
//     (any network, or none: "user:password@/db"): everything from the
//     first ":" of its word to the "@" before the network is hidden;
//   - any text quoting those, such as an error message.
//
// A keyword or query parameter is secret when its name suggests one
// (password, pass, pwd, secret, token, auth, credential, key except
// *KeyName, sig, sas, signature and the like).
func String(s string) string {
	if spans := dsnSpans(s); spans != nil {
		s = redactSpans(s, spans)
	}
	if oneURL.MatchString(s) && (strings.Contains(s, "://") || !dsnAddress.MatchString(s)) {
		if u, err := url.Parse(s); err == nil {
			return URL(u)
		}
		return redactRaw(s)
	}
	// Both readings are made on s as given, so that neither hides from
	// the other what it needs: a password may hold "@" or "key=".
	s = redactSpans(s, append(keyValueSpans(s), authoritySpan(s)...))
	return urlInText.ReplaceAllStringFunc(s, func(u string) string {
		body := strings.TrimRight(u, ".,;:)]}'\"`")
		return String(body) + u[len(body):]
	})
}

var (
	// oneURL: the whole of s is one URL (a scheme, then no white space).
	oneURL = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$`)
	// keyword: "name=" at the start of s or after white space, ";", "&",
	// "?", a quote or a bracket.
	keyword = regexp.MustCompile(`(?:^|[\s;&?'"` + "`" + `(\[{,])([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*`)
	// urlInText: a URL inside text, up to white space or a quote.
	urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>` + "`" + `]+`)
)

// authoritySpan returns where the userinfo is of a URL that a regular expression
// cannot delimit: one whose password holds white space, a quote or "://",
// or whose scheme is missing or malformed. Such a password can hold any
// character, so the userinfo is taken to run from the first URL start of
// s (a "://"; or, at the start of s or after white space, a quote or a
// bracket, a "//" or the ":" after the scheme of an opaque URL) to the
// last "@" of s: this hides more than the userinfo when text after the URL
// holds an "@", never less; when that text holds a "?" or "#", up to the
// end of the URL. The user name before the first ":" is kept when it is
// plausibly one (without white space, quotes or "/"), and so is a userinfo
// without ":" (a user name alone, as URL keeps it).
func authoritySpan(s string) [][2]int {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return nil
	}
	m := authorityStart.FindStringSubmatchIndex(s)
	if m == nil {
		return nil
	}
	from := m[1]
	if m[2] >= 0 { // an opaque URL: its body starts at the last character matched
		from--
	}
	if from > at {
		return nil
	}
	if strings.ContainsAny(s[from:at], "?#") {
		// The "@" may be in a query or a fragment (which URL hides), or
		// in a password holding "?" or "#": which part is the host cannot
		// be told, so none of the URL is shown, up to where it ends.
		end := at + strings.IndexFunc(s[at:], func(r rune) bool { return strings.ContainsRune(" \t\n\r\v\f'\"<>`", r) })
		if end < at {
			end = len(s)
		}
		return [][2]int{{from, at + len(strings.TrimRight(s[at:end], ".,;:)]}"))}}
	}
	user, _, hasPassword := strings.Cut(s[from:at], ":")
	if strings.ContainsAny(user, " \t\n\r\v\f'\"`/") {
		return [][2]int{{from, at}}
	}
	if !hasPassword {
		return nil // a user name alone, as URL shows it
	}
	return [][2]int{{from + len(user) + 1, at}}
}

// dsnAddress matches the "@" that ends the user and password of a
// go-sql-driver/mysql DSN ("user:password@tcp(host:3306)/db",
// "user:password@unix(/run/mysqld.sock)/db", "user:password@/db"): its
// network and address, or the "/" of the database name.
var dsnAddress = regexp.MustCompile(`@(?:[A-Za-z][A-Za-z0-9]*\([^()\s]*\))?/`)

// dsnSpans returns where the password is of each MySQL DSN in s: from the
// first ":" of the word that holds the DSN (a word runs from the start of
// s, white space, a quote or an opening bracket) up to the "@" before its
// network, as go-sql-driver/mysql reads it (the password may hold "@" and
// ":"). A word that holds "://" is a URL, which String reads as one.
func dsnSpans(s string) [][2]int {
	var spans [][2]int
	for _, m := range dsnAddress.FindAllStringIndex(s, -1) {
		at := m[0]
		start := strings.LastIndexAny(s[:at], " \t\n\r\v\f'\"`([{<") + 1
		word := s[start:at]
		if strings.Contains(word, "://") {
			continue
		}
		if colon := strings.IndexByte(word, ':'); colon >= 0 {
			spans = append(spans, [2]int{start + colon + 1, at})
		}
	}
	return spans
}

// authorityStart matches where a URL's userinfo may start; its group
// matches an opaque URL's scheme and first character.
var authorityStart = regexp.MustCompile(`://|(?:^|[\s'"` + "`" + `(\[{<])(?://|([A-Za-z][A-Za-z0-9+.-]*:[^\s/]))`)

// keyValueSpans returns where the value of every secret keyword=value in
// s is, reading values as libpq and Service Bus do: quoted ('...' or
// "...", with backslash escapes, up to the closing quote or the end), or
// unquoted up to the white space or the ";" that starts the next
// keyword=value, or the end (white space not followed by one may be part
// of the value: hidden with it).
func keyValueSpans(s string) [][2]int {
	var spans [][2]int
	last := 0
	for _, m := range keyword.FindAllStringSubmatchIndex(s, -1) {
		from := m[1] // where the value starts
		if from < last || !secretParam(s[m[2]:m[3]]) {
			continue
		}
		last = valueEnd(s, from)
		spans = append(spans, [2]int{from, last})
	}
	return spans
}

// redactSpans replaces each span of s, merged where they overlap or
// touch, by "xxxxx".
func redactSpans(s string, spans [][2]int) string {
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		from, to := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= to; i++ {
			to = max(to, spans[i][1])
		}
		b.WriteString(s[last:from])
		b.WriteString(redacted)
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}

// valueEnd returns where the keyword value starting at s[from] ends.
func valueEnd(s string, from int) int {
	if from < len(s) && (s[from] == '\'' || s[from] == '"') {
		q := s[from]
		for i := from + 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case q:
				return i + 1
			}
		}
		return len(s)
	}
	for i := from; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			// White space ends the value where the next keyword=value
			// starts; otherwise it may be inside the value (an unquoted
			// "SharedAccessKey=ab cd;…"), which goes on to the next
			// keyword or the end: more hidden, never less.
			if loc := keyword.FindStringIndex(s[i:]); loc != nil && loc[0] == 0 {
				return i
			}
		case c == ';':
			if loc := keyword.FindStringIndex(s[i:]); loc != nil && loc[0] == 0 {
				return i
			}
		}
	}
	return len(s)
}

func redactRaw(s string) string {
	if scheme, rest, ok := strings.Cut(s, "://"); ok && !strings.ContainsAny(scheme, ":/?#@") {
		return scheme + "://" + redactRest(rest)
	}
	if scheme, rest, ok := strings.Cut(s, ":"); ok && !strings.ContainsAny(scheme, "/?#@") {
		return scheme + ":" + redactOpaque(rest)
	}
	return redactRest(s)
}

// redactRest redacts what follows a URL's scheme. A password may hold
// "/" or "@": everything up to the last "@" is taken as userinfo; when a
// "?" or "#" comes before that "@", nothing is shown at all. After the
// userinfo, the fragment is dropped and the query redacted.
func redactRest(rest string) string {
	head := ""
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if q := strings.IndexAny(rest, "?#"); q >= 0 && q < at {
			// An "@" after a "?" or "#": a password holding them, or an
			// "@" in a query or fragment. Which part is the host cannot
			// be told, so none of it is shown.
			return redacted
		}
		user, _, _ := strings.Cut(rest[:at], ":")
		if strings.ContainsAny(user, "/?#") {
			user = redacted
		}
		head, rest = user+":"+redacted+"@", rest[at+1:]
	}
	frag := ""
	if i := strings.Index(rest, "#"); i >= 0 {
		rest, frag = rest[:i], "#"+redacted
	}
	if path, query, ok := strings.Cut(rest, "?"); ok {
		rest = path + "?" + redactQuery(query)
	}
	return head + rest + frag
}

// redactOpaque redacts an opaque URL body ("user:pass@host",
// "user:pass"): without an "@", all after the first ":" is taken as a
// password.
func redactOpaque(o string) string {
	if strings.Contains(o, "@") {
		return redactRest(o)
	}
	body, query, hasQuery := strings.Cut(o, "?")
	if i := strings.Index(body, "#"); i >= 0 {
		body, query, hasQuery = body[:i]+"#"+redacted, "", false
	}
	if user, _, ok := strings.Cut(body, ":"); ok {
		body = user + ":" + redacted
	}
	if hasQuery {
		return body + "?" + redactQuery(strings.SplitN(query, "#", 2)[0])
	}
	return body
}

// redactQuery redacts a raw query pair by pair, keeping the others as they
// were written.
func redactQuery(raw string) string {
	if raw == "" {
		return raw
	}
	pairs := strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' })
	for i, pair := range pairs {
		k, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			pairs[i] = redacted
			continue
		}
		if _, v, _ := strings.Cut(pair, "="); v != "" {
			if _, err := url.QueryUnescape(v); err != nil || secretParam(name) {
				pairs[i] = k + "=" + redacted
			}
		}
	}
	return strings.Join(pairs, "&")
}

// secretParam reports whether a query parameter's name suggests a secret.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "secret", "token", "auth", "cred", "private", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	if strings.Contains(n, "key") && !strings.HasSuffix(n, "keyname") {
		return true
	}
	return n == "sig" || n == "sas" || strings.HasPrefix(n, "sas") || strings.HasPrefix(n, "sig") || strings.HasSuffix(n, "sig")
}
