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
	RunBound(b, round, wary, raw, nil)
}

// RunBound is Run with a third contender in the rotation, when bound is
// not nil: the raw SDK doing what wary's guarantee costs it (a flush, a
// confirm), the most any implementation of that guarantee can do. It adds
// bound-msgs/s, wary/bound-%, median-wary/bound-% and bound-cpu-µs/msg.
func RunBound(b *testing.B, round int, wary, raw, bound func(n int)) {
	type side struct {
		f     func(int)
		t, c  time.Duration
		rates []float64
	}
	sides := []*side{{f: wary}, {f: raw}}
	if bound != nil {
		sides = append(sides, &side{f: bound})
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for _, s := range sides {
			start, cpu := time.Now(), CPUTime()
			s.f(n)
			d := time.Since(start)
			s.t, s.c = s.t+d, s.c+CPUTime()-cpu
			s.rates = append(s.rates, float64(n)/d.Seconds())
		}
	}
	b.StopTimer()
	rate := func(s *side) float64 { return float64(b.N) / s.t.Seconds() }
	cpu := func(s *side) float64 { return float64(s.c.Microseconds()) / float64(b.N) }
	w, r := sides[0], sides[1]
	b.ReportMetric(rate(w), "wary-msgs/s")
	b.ReportMetric(rate(r), "sdk-msgs/s")
	b.ReportMetric(100*rate(w)/rate(r), "wary/sdk-%")
	b.ReportMetric(100*median(w.rates)/median(r.rates), "median-wary/sdk-%")
	b.ReportMetric(cpu(w), "wary-cpu-µs/msg")
	b.ReportMetric(cpu(r), "sdk-cpu-µs/msg")
	if bound != nil {
		o := sides[2]
		b.ReportMetric(rate(o), "bound-msgs/s")
		b.ReportMetric(100*rate(w)/rate(o), "wary/bound-%")
		b.ReportMetric(100*median(w.rates)/median(o.rates), "median-wary/bound-%")
		b.ReportMetric(cpu(o), "bound-cpu-µs/msg")
	}
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
