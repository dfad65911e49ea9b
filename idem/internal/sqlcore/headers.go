package sqlcore

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"
)

// encodeHeaders writes a parked message's headers as text, losslessly: a
// JSON object when every name and value is valid UTF-8 (readable, and the
// form rows had before), otherwise a JSON array of [name, value] pairs,
// each in standard base64, sorted by name: JSON would replace invalid
// bytes with U+FFFD.
func encodeHeaders(h map[string]string) (string, error) {
	plain := true
	for k, v := range h {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			plain = false
			break
		}
	}
	if plain {
		b, err := json.Marshal(h)
		return string(b), err
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	pairs := make([][2]string, len(names))
	for i, k := range names {
		pairs[i] = [2]string{base64.StdEncoding.EncodeToString([]byte(k)), base64.StdEncoding.EncodeToString([]byte(h[k]))}
	}
	b, err := json.Marshal(pairs)
	return string(b), err
}

// decodeHeaders reads what encodeHeaders wrote.
func decodeHeaders(s string) (map[string]string, error) {
	if s == "" || s[0] != '[' {
		var h map[string]string
		err := json.Unmarshal([]byte(s), &h)
		return h, err
	}
	var pairs [][2]string
	if err := json.Unmarshal([]byte(s), &pairs); err != nil {
		return nil, err
	}
	h := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, err1 := base64.StdEncoding.DecodeString(p[0])
		v, err2 := base64.StdEncoding.DecodeString(p[1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		h[string(k)] = string(v)
	}
	return h, nil
}
