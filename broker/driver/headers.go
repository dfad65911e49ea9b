package driver

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
)

// Headers are a message's application headers: name and value pairs, each
// name at most once (broker.Topic.Publish refuses a repeated name,
// ValidateHeaders), in the order they were set or received. A literal
// reads like a map's: broker.Headers{{"tenant", "t1"}, {"trace", "x"}};
// nil is empty.
//
// It is a slice, not a map, so that a driver hands over a received
// message's headers without building a map for each: it appends every
// message's pairs of a batch into one backing array (each message's a
// window of it whose capacity ends with them). A lookup is a scan, which
// for the few headers a message carries is faster than a map's hash.
//
// Like a map, it is a reference: copies of a Message share their
// headers, and Set or Del on one copy may change what another reads.
// Clone before changing a copy's.
type Headers [][2]string

// Get returns the value of the header name ("" if there is none).
func (h Headers) Get(name string) string {
	for i := range h {
		if h[i][0] == name {
			return h[i][1]
		}
	}
	return ""
}

// Lookup returns the value of the header name and whether h has it.
func (h Headers) Lookup(name string) (string, bool) {
	for i := range h {
		if h[i][0] == name {
			return h[i][1], true
		}
	}
	return "", false
}

// Set sets the header name to value: in place if h has it, else appended.
func (h *Headers) Set(name, value string) {
	for i := range *h {
		if (*h)[i][0] == name {
			(*h)[i][1] = value
			return
		}
	}
	*h = append(*h, [2]string{name, value})
}

// Del removes the header name, keeping the others' order. The backing
// array is written in place: a copy shared with another message (Clone
// it first) sees the change.
func (h *Headers) Del(name string) {
	*h = slices.DeleteFunc(*h, func(p [2]string) bool { return p[0] == name })
}

// Len returns the number of headers.
func (h Headers) Len() int { return len(h) }

// All returns an iterator over the headers' names and values, in order.
func (h Headers) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, p := range h {
			if !yield(p[0], p[1]) {
				return
			}
		}
	}
}

// Clone returns a copy of h that shares no backing array with it (nil
// for nil).
func (h Headers) Clone() Headers { return slices.Clip(slices.Clone(h)) }

// Map returns the headers as a new map (nil if h is empty), for code that
// wants one; a repeated name keeps its first value.
func (h Headers) Map() map[string]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string]string, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		m[h[i][0]] = h[i][1]
	}
	return m
}

// HeadersOf returns m's entries as Headers, sorted by name (nil if m is
// empty): a map, such as a store's or an SDK's, made Headers.
func HeadersOf(m map[string]string) Headers {
	if len(m) == 0 {
		return nil
	}
	h := make(Headers, 0, len(m))
	for k, v := range m {
		h = append(h, [2]string{k, v})
	}
	slices.SortFunc(h, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	return h
}

// Equal reports whether h and o hold the same names with the same values,
// in any order.
func (h Headers) Equal(o Headers) bool {
	if len(h) != len(o) {
		return false
	}
	for _, p := range h {
		if v, ok := o.Lookup(p[0]); !ok || v != p[1] {
			return false
		}
	}
	for _, p := range o {
		if v, ok := h.Lookup(p[0]); !ok || v != p[1] {
			return false
		}
	}
	return true
}

// MarshalJSON writes h as a JSON object, names in h's order, as a map of
// the same headers would read.
func (h Headers) MarshalJSON() ([]byte, error) {
	if h == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	for i, p := range h {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(p[0])
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p[1])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a JSON object of strings (or null) in its order; a
// name the object repeats keeps its last value, as in a map.
func (h *Headers) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		*h = nil
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("driver: headers are a JSON object of strings, not %v", t)
	}
	out := Headers{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("driver: header %q: %w", t, err)
		}
		out.Set(t.(string), v)
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*h = out
	return nil
}
