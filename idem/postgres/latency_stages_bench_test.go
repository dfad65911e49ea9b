package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem/internal/idemtest"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// stages splits a latency run's rows at points between commit and
// confirm: spans[i] is each row's time, in milliseconds, sorted, from
// point i-1 (0: its commit) to point i; names[i] names point i.
// decode+raw: received from the WAL sender, confirmed; the stream:
// received by its source, its window's publish call began, returned.
// batch is the mean number of rows per publish call (the stream's
// windows; 0 for decode+raw).
type stages struct {
	names []string
	spans [][]float64
	batch float64
}

// stagesOf computes stages from each row's commit time and its times at
// each point, by message ID (rows missing a point are left out).
func stagesOf(committed map[string]time.Time, names []string, points ...map[string]time.Time) stages {
	s := stages{names: names, spans: make([][]float64, len(points))}
rows:
	for id, c := range committed {
		at := make([]time.Time, len(points))
		for i, p := range points {
			t, ok := p[id]
			if !ok {
				continue rows
			}
			at[i] = t
		}
		for i := range points {
			s.spans[i] = append(s.spans[i], float64(at[i].Sub(c))/float64(time.Millisecond))
			c = at[i]
		}
	}
	for _, sp := range s.spans {
		slices.Sort(sp)
	}
	return s
}

// String is the stages' p50 and p99, point by point.
func (s stages) String() string {
	var b strings.Builder
	b.WriteString("commit")
	for i, sp := range s.spans {
		fmt.Fprintf(&b, " → %s p50 %.1f p99 %.1f", s.names[i], idemtest.Percentile(sp, 0.5), idemtest.Percentile(sp, 0.99))
	}
	if s.batch > 0 {
		fmt.Fprintf(&b, " (ms); rows per publish call %.1f", s.batch)
	} else {
		b.WriteString(" (ms)")
	}
	return b.String()
}

// stageTopic, for BenchmarkRelayLatencyRabbitStream's stage timing
// (WARY_BENCH_STAGES=1), is inner behind a driver that notes when each
// message's publish call began and returned (the broker's confirm of
// the call's last message), and how many calls there were. It adds a
// portable layer's validation and a copy of each message to the
// publish, a few µs.
type stageTopic struct {
	inner *broker.Topic
	mu    sync.Mutex
	sent  map[string]time.Time // the call began
	done  map[string]time.Time // the call returned
	calls int
}

func newStageTopic(inner *broker.Topic) (*stageTopic, *broker.Topic) {
	g := &stageTopic{inner: inner, sent: map[string]time.Time{}, done: map[string]time.Time{}}
	return g, broker.NewTopic(g, &broker.TopicOptions{Retry: &broker.RetryPolicy{Attempts: 1}})
}

func (g *stageTopic) SendBatch(ctx context.Context, msgs []*driver.Message) error {
	start := time.Now()
	bms := make([]*broker.Message, len(msgs))
	for i, m := range msgs {
		bms[i] = &broker.Message{ID: m.ID, Key: m.Key, Headers: m.Headers, Body: m.Body}
	}
	err := g.inner.Publish(ctx, bms...)
	end := time.Now()
	g.mu.Lock()
	g.calls++
	for _, m := range msgs {
		g.sent[m.ID], g.done[m.ID] = start, end
	}
	g.mu.Unlock()
	return err
}

func (g *stageTopic) Capabilities() capability.Topic  { return g.inner.Capabilities() }
func (g *stageTopic) Classify(error) driver.ErrorInfo { return driver.ErrorInfo{} }
func (g *stageTopic) As(any) bool                     { return false }
func (g *stageTopic) ErrorAs(error, any) bool         { return false }
func (g *stageTopic) Close() error                    { return nil }

// stages returns the run's stages: commit, received by the stream's
// source (recv), publish call, its return; and the mean rows per call.
func (g *stageTopic) stages(l idemtest.Latency, recv map[string]time.Time) stages {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := stagesOf(l.Committed, []string{"received", "publish call", "returned"}, recv, g.sent, g.done)
	if g.calls > 0 {
		s.batch = float64(len(g.sent)) / float64(g.calls)
	}
	return s
}

// streamRecv notes when the streaming sources of s receive each row
// (postgres.ObserveStream) until the returned function is called, which
// stops it and returns the times by message ID.
func streamRecv(s *postgres.Store) func() map[string]time.Time {
	var mu sync.Mutex
	at := map[string]time.Time{}
	postgres.ObserveStream(s, func(rows []outbox.Row) {
		now := time.Now()
		mu.Lock()
		for _, r := range rows {
			at[r.ID] = now
		}
		mu.Unlock()
	})
	return func() map[string]time.Time {
		postgres.ObserveStream(s, nil)
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}
