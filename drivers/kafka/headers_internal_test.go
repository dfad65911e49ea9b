package kafka

import (
	"fmt"
	"testing"

	"github.com/wary-go/wary/broker/driver"
)

// TestLastOfEach: a record's repeated header name keeps its last value at
// its first place, as the map the driver built did; with few headers (a
// scan) and many (a set).
func TestLastOfEach(t *testing.T) {
	got := lastOfEach(driver.Headers{{"a", "1"}, {"b", "2"}, {"a", "3"}, {"c", "4"}, {"b", "5"}})
	if fmt.Sprint(got) != "[[a 3] [b 5] [c 4]]" {
		t.Fatalf("few: %v", got)
	}
	var many driver.Headers
	for i := range 40 {
		many = append(many, [2]string{fmt.Sprint("h", i%20), fmt.Sprint(i)})
	}
	got = lastOfEach(many)
	if len(got) != 20 || got.Get("h0") != "20" || got.Get("h19") != "39" || got[0][0] != "h0" {
		t.Fatalf("many: %v", got)
	}
}
