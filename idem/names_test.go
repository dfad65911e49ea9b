package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/idem"
)

func TestValidateConsumer(t *testing.T) {
	for _, ok := range []string{"a", "orders-v2.eu:1", "A_b", strings.Repeat("x", 63), "1st"} {
		if err := idem.ValidateConsumer(ok); err != nil {
			t.Errorf("ValidateConsumer(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", `a"b`, "a'b", "a;b", "a\x00b", "a b", "é", "a\tb", strings.Repeat("x", 64)} {
		err := idem.ValidateConsumer(bad)
		if !errors.Is(err, idem.ErrInvalidName) {
			t.Errorf("ValidateConsumer(%q): %v, want ErrInvalidName", bad, err)
		}
	}
}

func TestParseEvent(t *testing.T) {
	ev := idem.Event{AggregateID: "a-1", Version: 7, Sequence: 9, Type: "order.placed"}
	got, err := idem.ParseEvent(&broker.Message{ID: "m", Headers: ev.Headers()})
	if err != nil || got != ev {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for _, h := range []broker.Headers{
		nil,
		{{idem.HeaderAggregateVersion, "1"}},
		{{idem.HeaderAggregateID, "a"}, {idem.HeaderAggregateVersion, "x"}},
		{{idem.HeaderAggregateID, "a"}, {idem.HeaderAggregateVersion, "-1"}},
		{{idem.HeaderAggregateID, "a"}, {idem.HeaderSequence, "1.5"}},
	} {
		if _, err := idem.ParseEvent(&broker.Message{ID: "m", Headers: h}); !errors.Is(err, idem.ErrNoEvent) {
			t.Errorf("ParseEvent(%v): %v, want ErrNoEvent", h, err)
		}
	}
}
