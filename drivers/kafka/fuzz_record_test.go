package kafka

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/driver"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FuzzRecordToMessage: any record, with any headers, maps to a message
// without panicking. The driver's retry headers are read only on the
// retry topic, and there bounded (attempt within [1, limit], due time at
// most MaxNackDelay ahead); they never reach the message's headers. The
// ID is the first wary-id header, the key and body are the record's, and
// every other header is the record's (the last of repeated names).
//
// headers holds names and values separated by NUL bytes.
func FuzzRecordToMessage(f *testing.F) {
	f.Add([]byte("k"), []byte("body"), []byte("wary-id\x00m1\x00h\x00v"), true, uint16(3), int64(10))
	f.Add([]byte(nil), []byte(nil), []byte("wary-id\x00m1\x00wary-attempt\x009223372036854775807\x00wary-not-before\x009223372036854775807"), true, uint16(0), int64(0))
	f.Add([]byte("k"), []byte("x"), []byte("wary-attempt\x007\x00wary-not-before\x009223372036854775807\x00wary-id\x00a\x00wary-id\x00b"), false, uint16(3), int64(5))
	f.Add([]byte{}, []byte{0xff}, []byte("wary-attempt\x00-1\x00wary-not-before\x00-9223372036854775808\x00h\x001\x00h\x002"), true, uint16(1), int64(-1))
	f.Add([]byte("k"), []byte("b"), []byte("wary-attempt\x00 2\x00wary-attempt\x00+4\x00\xff\x00\xfe"), true, uint16(65535), int64(1<<62))
	f.Fuzz(func(t *testing.T, key, value, headers []byte, retry bool, limit uint16, offset int64) {
		var hs []kgo.RecordHeader
		parts := bytes.Split(headers, []byte{0})
		for i := 0; i+1 < len(parts); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: string(parts[i]), Value: parts[i+1]})
		}
		r := &kgo.Record{Topic: "t", Key: key, Value: value, Headers: hs, Offset: offset, Timestamp: time.UnixMilli(1)}
		const maxDelay = time.Hour
		now := time.Now()
		p := newPartition(tp{"t", 0}, retry, int(limit), maxDelay)
		p.redeliverUpTo = 5
		e := new(entry)
		p.ingest(e, r, now)
		p.handOut(e)
		m := materialize(snapshot([]*entry{e}), false)[0]

		hi := maxAttempt
		if limit > 0 {
			hi = int(limit)
		}
		lo, known := 1, 0
		if offset <= p.redeliverUpTo {
			lo, known = 2, 1 // a known redelivery counts one more
		}
		if m.Attempt < 1 || m.Attempt > hi+known || m.Attempt < lo || m.Redelivered != (m.Attempt > 1) {
			t.Fatalf("attempt %d (redelivered %t) outside [%d, %d]", m.Attempt, m.Redelivered, lo, hi+known)
		}
		if !retry && (m.Attempt != lo || !e.notBefore.IsZero()) {
			t.Fatalf("the main topic's record took retry headers: attempt %d, due %v", m.Attempt, e.notBefore)
		}
		if e.notBefore.After(now.Add(maxDelay + time.Millisecond)) {
			t.Fatalf("due %v, more than MaxNackDelay ahead", e.notBefore)
		}
		wantHeaders, id, hasID := map[string]string{}, "", false
		for _, h := range hs {
			switch h.Key {
			case HeaderID:
				if !hasID {
					id, hasID = string(h.Value), true
				}
			case HeaderAttempt, HeaderNotBefore:
			default:
				if !driver.ReservedHeader(h.Key) { // another producer's: dropped
					wantHeaders[h.Key] = string(h.Value)
				}
			}
		}
		if m.ID != id || m.Key != string(key) || !bytes.Equal(m.Body, value) || len(m.Headers) != len(wantHeaders) {
			t.Fatalf("message %q %q %q %v, want %q %q %q %v", m.ID, m.Key, m.Body, m.Headers, id, key, value, wantHeaders)
		}
		for k, v := range wantHeaders {
			if got, ok := m.Headers.Lookup(k); !ok || got != v {
				t.Fatalf("header %q = %q, want %q", k, got, v)
			}
		}
		if retry {
			// The attempt header, when it parses within bounds, is taken.
			for _, h := range hs {
				if h.Key == HeaderAttempt {
					if n, err := strconv.Atoi(string(h.Value)); err == nil && n >= 1 && n <= hi && offset > p.redeliverUpTo && m.Attempt != lastAttempt(hs, hi) {
						t.Fatalf("attempt %d, want %d", m.Attempt, lastAttempt(hs, hi))
					}
				}
			}
		}
	})
}

// lastAttempt is the attempt the last parseable wary-attempt header
// sets, clamped to hi.
func lastAttempt(hs []kgo.RecordHeader, hi int) int {
	a := 1
	for _, h := range hs {
		if n, err := strconv.ParseInt(string(h.Value), 10, 64); h.Key == HeaderAttempt && err == nil && n >= 1 {
			a = int(min(n, int64(hi)))
		}
	}
	return a
}
