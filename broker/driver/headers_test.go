package driver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/wary-go/wary/broker/driver"
)

// TestHeaders: the methods read and write name and value pairs as a
// map of them would, in order.
func TestHeaders(t *testing.T) {
	var h driver.Headers
	if h.Get("a") != "" || h.Len() != 0 {
		t.Fatal("nil headers are not empty")
	}
	if _, ok := h.Lookup("a"); ok {
		t.Fatal("Lookup found a header in nil headers")
	}
	h.Set("a", "1")
	h.Set("b", "2")
	h.Set("a", "3") // in place
	h.Set("c", "")
	if got := fmt.Sprint(h); got != "[[a 3] [b 2] [c ]]" {
		t.Fatalf("after Set: %s", got)
	}
	if v, ok := h.Lookup("c"); !ok || v != "" {
		t.Fatalf("Lookup of an empty value: %q, %t", v, ok)
	}
	var names []string
	for k, v := range h.All() {
		names = append(names, k+"="+v)
		if k == "b" {
			break
		}
	}
	if !slices.Equal(names, []string{"a=3", "b=2"}) {
		t.Fatalf("All, stopped at b: %v", names)
	}
	c := h.Clone()
	h.Del("a")
	h.Del("missing")
	if got := fmt.Sprint(h); got != "[[b 2] [c ]]" || c.Get("a") != "3" || c.Len() != 3 {
		t.Fatalf("after Del: %s, clone %s", got, c)
	}
	// A window of a larger array, as drivers hand them out: Set appends
	// past it without writing over the neighbour.
	slab := driver.Headers{{"x", "1"}, {"y", "2"}}
	w := slab[0:1:1]
	w.Set("z", "3")
	if slab[1] != [2]string{"y", "2"} || w.Get("z") != "3" {
		t.Fatalf("Set on a window wrote over its neighbour: %v, %v", slab, w)
	}
	if !c.Equal(driver.Headers{{"c", ""}, {"b", "2"}, {"a", "3"}}) || c.Equal(driver.Headers{{"a", "3"}, {"a", "3"}, {"b", "2"}}) {
		t.Fatal("Equal: order matters, or a repeated name counts")
	}
	if m := c.Map(); len(m) != 3 || m["a"] != "3" || driver.Headers(nil).Map() != nil {
		t.Fatalf("Map: %v", m)
	}
	if got := driver.HeadersOf(map[string]string{"b": "2", "a": "1"}); fmt.Sprint(got) != "[[a 1] [b 2]]" || driver.HeadersOf(nil) != nil {
		t.Fatalf("HeadersOf: %v", got)
	}
}

// TestHeadersJSON: an object, in order, both ways; a repeated name keeps
// its last value; anything but an object of strings is an error.
func TestHeadersJSON(t *testing.T) {
	b, err := json.Marshal(driver.Headers{{"z", "1"}, {"a", "\"q\""}})
	if err != nil || string(b) != `{"z":"1","a":"\"q\""}` {
		t.Fatalf("Marshal: %s, %v", b, err)
	}
	if b, _ := json.Marshal(driver.Headers(nil)); string(b) != "null" {
		t.Fatalf("Marshal nil: %s", b)
	}
	var h driver.Headers
	if err := json.Unmarshal([]byte(`{"z":"1","a":"2","z":"3"}`), &h); err != nil || fmt.Sprint(h) != "[[z 3] [a 2]]" {
		t.Fatalf("Unmarshal: %v, %v", h, err)
	}
	if err := json.Unmarshal([]byte(`null`), &h); err != nil || h != nil {
		t.Fatalf("Unmarshal null: %v, %v", h, err)
	}
	for _, bad := range []string{`[]`, `{"a":1}`, `{"a":"1"`, `"x"`} {
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("Unmarshal(%s) = nil, want an error", bad)
		}
	}
}

// TestValidateHeadersRepeatedName: a name set twice is refused, with few
// headers (a scan) and many (a set).
func TestValidateHeadersRepeatedName(t *testing.T) {
	for _, n := range []int{2, 40} {
		var h driver.Headers
		for i := range n - 1 {
			h = append(h, [2]string{fmt.Sprint("h", i), "v"})
		}
		if err := driver.ValidateHeaders(h); err != nil {
			t.Fatalf("%d distinct headers: %v", n-1, err)
		}
		h = append(h, [2]string{"h0", "again"})
		if err := driver.ValidateHeaders(h); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%d headers, one name twice: %v, want ErrInvalid", n, err)
		}
	}
}
