package nats

import "testing"

// TestParseAckSubject checks the driver's own reading of a delivery's
// reply subject against the forms nats.go's parser accepts (v1 and v2,
// with a domain, without one as "_", with a trailing token), and that
// anything else is left to nats.go (ok false).
func TestParseAckSubject(t *testing.T) {
	for _, c := range []struct {
		subj string
		want ackMeta
		ok   bool
	}{
		{"$JS.ACK.S.C.3.42.7.1700000000123456789.5", ackMeta{streamSeq: 42, delivered: 3, timestamp: 1700000000123456789}, true},
		{"$JS.ACK._.HASH.S.C.1.9.2.17.0", ackMeta{streamSeq: 9, delivered: 1, timestamp: 17}, true},
		{"$JS.ACK.dom.HASH.S.C.2.10.4.18.0.rnd", ackMeta{streamSeq: 10, delivered: 2, timestamp: 18}, true},
		{"$JS.ACK.dom.HASH.S.C.2.10.4.18.0.rnd.more", ackMeta{streamSeq: 10, delivered: 2, timestamp: 18}, true},
		{"$JS.ACK.S.C.3.42.7.17", ackMeta{}, false},      // 8 tokens
		{"$JS.ACK.x.S.C.3.42.7.17.0", ackMeta{}, false},  // 10 tokens
		{"$JS.ACK.S.C.3.4x.7.17.0", ackMeta{}, false},    // not a number
		{"$JS.ACK.S.C.3..7.17.0", ackMeta{}, false},      // empty number
		{"_INBOX.abc.S.C.3.42.7.17.0", ackMeta{}, false}, // not an ack subject
		{"", ackMeta{}, false},
	} {
		got, ok := parseAckSubject(c.subj)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseAckSubject(%q) = %+v, %v; want %+v, %v", c.subj, got, ok, c.want, c.ok)
		}
	}
}
