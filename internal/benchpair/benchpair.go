// Package benchpair runs two implementations of the same work in
// alternating rounds inside one Go benchmark, so that both see the same
// load on the machine, and reports both rates. The drivers' benchmarks use
// it to compare wary with the raw SDK.
package benchpair

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// Run calls wary and raw alternately with round messages each (fewer in
// the last round) until each has handled b.N. It reports wary-msgs/s and
// sdk-msgs/s over the whole run, wary/sdk in percent, the ratio of the
// median per-round rates (median-wary/sdk-%, robust to one round that
// stalls on an emulator), and the process's CPU per message for each.
func Run(b *testing.B, round int, wary, raw func(n int)) {
	var tw, tr, cw, cr time.Duration
	var rw, rr []float64
	timed := func(f func(int), n int, t, c *time.Duration, rates *[]float64) {
		start, cpu := time.Now(), CPUTime()
		f(n)
		d := time.Since(start)
		*t, *c = *t+d, *c+CPUTime()-cpu
		*rates = append(*rates, float64(n)/d.Seconds())
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		timed(wary, n, &tw, &cw, &rw)
		timed(raw, n, &tr, &cr, &rr)
	}
	b.StopTimer()
	w, r := float64(b.N)/tw.Seconds(), float64(b.N)/tr.Seconds()
	b.ReportMetric(w, "wary-msgs/s")
	b.ReportMetric(r, "sdk-msgs/s")
	b.ReportMetric(100*w/r, "wary/sdk-%")
	b.ReportMetric(100*median(rw)/median(rr), "median-wary/sdk-%")
	b.ReportMetric(float64(cw.Microseconds())/float64(b.N), "wary-cpu-µs/msg")
	b.ReportMetric(float64(cr.Microseconds())/float64(b.N), "sdk-cpu-µs/msg")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// CPUTime is the CPU (user and system) the process has used so far, or 0
// where getrusage fails.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
