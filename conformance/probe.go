package conformance

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Outcome is what one scenario of a Probe found.
type Outcome string

// Outcomes.
const (
	// Kept: the broker behaved as it declares.
	Kept Outcome = "kept"
	// Broken: an observation contradicts the declaration.
	Broken Outcome = "broken"
	// NotApplicable: the declaration does not call for the scenario, or
	// the harness cannot run it; Detail says why.
	NotApplicable Outcome = "not applicable"
)

// Result is one scenario's outcome.
type Result struct {
	Scenario string        `json:"scenario"`
	Outcome  Outcome       `json:"outcome"`
	Detail   string        `json:"detail,omitempty"`
	Took     time.Duration `json:"took_ns"`
}

// Reporter follows a Probe: Start before each scenario, Done after it.
// Calls come from one goroutine at a time.
type Reporter interface {
	Start(scenario string)
	Done(r Result)
}

// Probe runs the named scenarios (every one, when names is empty) against
// h outside of go test, as an operator's tool does to measure a live
// broker: a scenario that fails is reported as Broken with its failure
// message, and Probe goes on with the next. It returns the capabilities
// the harness's fixture declares, and an error only when those cannot be
// read or a name is unknown. Unlike Run, it does not check for leaked
// goroutines, and ctx bounds the whole probe.
func Probe(ctx context.Context, h Harness, r Reporter, names ...string) (Capabilities, []Result, error) {
	for _, n := range names {
		if !slices.Contains(Scenarios(), n) {
			return Capabilities{}, nil, fmt.Errorf("conformance: no scenario %q (scenarios: %s)", n, strings.Join(Scenarios(), ", "))
		}
	}
	h.defaults()
	var caps Capabilities
	pt := runProbe(ctx, "capabilities", func(t T) { caps = probeCaps(t, &h) })
	if pt.failed {
		return caps, nil, fmt.Errorf("conformance: cannot read the capabilities: %s", pt.log())
	}
	var out []Result
	for _, s := range scenarios {
		if len(names) > 0 && !slices.Contains(names, s.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return caps, out, err
		}
		r.Start(s.name)
		res := Result{Scenario: s.name}
		if why := s.need(caps, &h); why != "" {
			res.Outcome, res.Detail = NotApplicable, why
		} else {
			start := time.Now()
			e := &env{h: &h, caps: caps}
			pt := runProbe(ctx, s.name, func(t T) { s.run(t, e) })
			res.Took = time.Since(start)
			switch {
			case pt.failed:
				res.Outcome, res.Detail = Broken, pt.log()
			case pt.skipped:
				res.Outcome, res.Detail = NotApplicable, pt.log()
			default:
				res.Outcome = Kept
			}
		}
		r.Done(res)
		out = append(out, res)
	}
	return caps, out, nil
}

// runProbe runs f with a probeT in a goroutine of its own (FailNow and
// SkipNow end it with runtime.Goexit, as in go test), then its cleanups.
func runProbe(ctx context.Context, name string, f func(t T)) *probeT {
	t := &probeT{name: name, ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("panic: %v", p)
			}
		}()
		f(t)
	}()
	<-done
	t.runCleanups()
	return t
}

// probeT is the T a Probe hands scenarios and harnesses: the reporter
// that records a scenario's logs, failure or skip instead of go test.
type probeT struct {
	name string
	ctx  context.Context

	mu              sync.Mutex
	failed, skipped bool
	logs            []string
	cleanups        []func()
}

func (t *probeT) Helper()                  {}
func (t *probeT) Name() string             { return t.name }
func (t *probeT) Context() context.Context { return t.ctx }

func (t *probeT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *probeT) runCleanups() {
	for {
		t.mu.Lock()
		if len(t.cleanups) == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[len(t.cleanups)-1]
		t.cleanups = t.cleanups[:len(t.cleanups)-1]
		t.mu.Unlock()
		func() {
			defer func() { _ = recover() }()
			f()
		}()
	}
}

func (t *probeT) Log(args ...any) { t.logf("%s", fmt.Sprintln(args...)) }

func (t *probeT) Logf(format string, args ...any) { t.logf(format, args...) }

func (t *probeT) logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (t *probeT) Fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

func (t *probeT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *probeT) Skipped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped
}

func (t *probeT) Error(args ...any)                 { t.Log(args...); t.Fail() }
func (t *probeT) Errorf(format string, args ...any) { t.Logf(format, args...); t.Fail() }
func (t *probeT) FailNow()                          { t.Fail(); runtime.Goexit() }
func (t *probeT) Fatal(args ...any)                 { t.Log(args...); t.FailNow() }
func (t *probeT) Fatalf(format string, args ...any) { t.Logf(format, args...); t.FailNow() }

func (t *probeT) SkipNow() {
	t.mu.Lock()
	t.skipped = true
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *probeT) Skip(args ...any)                 { t.Log(args...); t.SkipNow() }
func (t *probeT) Skipf(format string, args ...any) { t.Logf(format, args...); t.SkipNow() }

func (t *probeT) TempDir() string {
	dir, err := os.MkdirTemp("", "wary-probe")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// log is what the scenario logged, failures included.
func (t *probeT) log() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.logs, "; ")
}
