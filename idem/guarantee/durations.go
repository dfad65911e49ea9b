package guarantee

import (
	"math"
	"strings"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// Durations as the statement computes and prints them.

// satMul is d×n, or the largest Duration if that overflows.
func satMul(d time.Duration, n int) time.Duration {
	if d <= 0 || n <= 0 {
		return 0
	}
	if int64(n) > math.MaxInt64/int64(d) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// satAdd is a+b for non-negative a and b, or the largest Duration if that
// overflows.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// horizon renders a redelivery horizon or retention for people.
func horizon(d time.Duration) string {
	if d == capability.HorizonUnknown || d == capability.HorizonUnbounded {
		return capability.HorizonString(d)
	}
	return short(d)
}

// short renders d without zero minutes and seconds: "168h", "1m", "13m31s".
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
