package rabbit

import (
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
)

// The server version decides the default delivery limit of quorum queues,
// and with it what the capabilities declare and what open refuses. Only
// RabbitMQ 3.10 runs live; this covers the mapping for every version.
func TestVersionCapabilities(t *testing.T) {
	for _, tc := range []struct {
		version    string
		known      bool
		defLimit   int  // serverDefaultLimit, in deliveries
		unlimitArg bool // NoDeliveryLimit declares x-delivery-limit -1
	}{
		{"3.10.25", true, 0, false},
		{"3.13.7", true, 0, false},
		{"3.8.0", true, 0, false},
		{"4.0.0", true, 21, true},
		{"4.0.5", true, 21, true},
		{"4.1.0-rc.1", true, 21, true},
		{"4.2.1+2.g1a2b3c", true, 21, true},
		{"5.0.0", true, 21, true},
		// Unknown versions are taken for 4.x: a limit assumed where there is
		// none refuses a configuration, one missed drops messages.
		{"", false, 21, true},
		{"0.0.0", false, 21, true},
		{"banana", false, 21, true},
		{"4", false, 21, true},
	} {
		v := parseVersion(tc.version)
		if v.known != tc.known {
			t.Errorf("%q: known %t, want %t", tc.version, v.known, tc.known)
		}
		if got := serverDefaultLimit(v); got != tc.defLimit {
			t.Errorf("%q: default limit %d, want %d", tc.version, got, tc.defLimit)
		}
		_, arg := Topology{DeliveryLimit: NoDeliveryLimit}.limitArg(v)
		if arg != tc.unlimitArg {
			t.Errorf("%q: x-delivery-limit -1 declared %t, want %t", tc.version, arg, tc.unlimitArg)
		}

		// What a subscription declares and refuses on this server.
		for _, c := range []struct {
			limit      int
			deadLetter bool
			wantLimit  int  // capability.Subscription.DeliveryLimit
			refused    bool // by OpenSubscription and Declare
		}{
			{0, true, tc.defLimit, false},
			{0, false, tc.defLimit, tc.defLimit > 0},
			{5, true, 5, false},
			{5, false, 5, true},
			{NoDeliveryLimit, false, 0, false},
			{NoDeliveryLimit, true, 0, false},
			{-2, true, 0, true},
		} {
			err := checkLimit("SubscriptionOptions", c.limit, c.deadLetter, v)
			if refused := err != nil; refused != c.refused || refused && !errors.Is(err, broker.ErrInvalid) {
				t.Errorf("%q limit %d dead-letter %t: %v, want refused %t (ErrInvalid)", tc.version, c.limit, c.deadLetter, err, c.refused)
			}
			if c.refused {
				continue
			}
			caps := subCaps{deliveryLimit: effectiveLimit(c.limit, v), deadLetter: c.deadLetter}.capabilities()
			wantMode := capability.LimitNone
			if c.wantLimit > 0 {
				wantMode = capability.LimitNative
			}
			if caps.DeliveryLimit != c.wantLimit || caps.DeliveryLimitMode != wantMode {
				t.Errorf("%q limit %d: capabilities limit %d mode %s, want %d %s", tc.version, c.limit, caps.DeliveryLimit, caps.DeliveryLimitMode, c.wantLimit, wantMode)
			}
			if caps.RedeliveryHorizon != capability.HorizonUnbounded {
				t.Errorf("horizon %s, want unbounded", capability.HorizonString(caps.RedeliveryHorizon))
			}
		}
	}

	// The configured limit is declared as x-delivery-limit N-1 everywhere.
	for _, v := range []string{"3.10.0", "4.0.0"} {
		if lim, ok := (Topology{DeliveryLimit: 5, DeadLetter: true}).limitArg(parseVersion(v)); !ok || lim != 4 {
			t.Errorf("%s: DeliveryLimit 5 declares x-delivery-limit %d (%t), want 4", v, lim, ok)
		}
		if _, ok := (Topology{}).limitArg(parseVersion(v)); ok {
			t.Errorf("%s: DeliveryLimit 0 declares x-delivery-limit", v)
		}
	}
}
