package sqlcore

import (
	"strings"

	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/wary-go/wary/broker"
	"slices"
	"unicode/utf8"
)

// encodeHeaders writes a parked message's headers as text, losslessly: a
// JSON object when every name and value is valid UTF-8 (readable, and the
// form rows had before), otherwise a JSON array of [name, value] pairs,
// each in standard base64, sorted by name: JSON would replace invalid
// bytes with U+FFFD.
func encodeHeaders(h broker.Headers) (string, error) {
	plain := true
	for k, v := range h.All() {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			plain = false
			break
		}
	}
	if plain {
		b, err := json.Marshal(h)
		return string(b), err
	}
	sorted := slices.SortedFunc(slices.Values(h), func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	pairs := make([][2]string, len(sorted))
	for i, p := range sorted {
		pairs[i] = [2]string{base64.StdEncoding.EncodeToString([]byte(p[0])), base64.StdEncoding.EncodeToString([]byte(p[1]))}
	}
	b, err := json.Marshal(pairs)
	return string(b), err
}

// decodeHeaders reads what encodeHeaders wrote.
func decodeHeaders(s string) (broker.Headers, error) {
	if s == "" || s[0] != '[' {
		var h broker.Headers
		err := json.Unmarshal([]byte(s), &h)
		return h, err
	}
	var pairs [][2]string
	if err := json.Unmarshal([]byte(s), &pairs); err != nil {
		return nil, err
	}
	h := make(broker.Headers, 0, len(pairs))
	for _, p := range pairs {
		k, err1 := base64.StdEncoding.DecodeString(p[0])
		v, err2 := base64.StdEncoding.DecodeString(p[1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		h = append(h, [2]string{string(k), string(v)}) // encodeHeaders wrote each name once
	}
	return h, nil
}
