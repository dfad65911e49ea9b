package postgres_test

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem/internal/idemtest"
)

// stages splits a latency run's rows at a point between commit and
// confirm: before is each row's time from its commit to that point
// (decode+raw: the row received from the WAL sender; the stream: the
// relay's publish call that carried it), after from there to its
// confirm, both in milliseconds, sorted. batch is the mean number of
// rows per publish call (the stream's windows; 0 for decode+raw).
type stages struct {
	before, after []float64
	batch         float64
}

// stagesOf computes stages from each row's commit, split and confirm
// times, by message ID.
func stagesOf(committed, split, confirmed map[string]time.Time) stages {
	var s stages
	for id, c := range committed {
		at, ok1 := split[id]
		done, ok2 := confirmed[id]
		if !ok1 || !ok2 {
			continue
		}
		s.before = append(s.before, float64(at.Sub(c))/float64(time.Millisecond))
		s.after = append(s.after, float64(done.Sub(at))/float64(time.Millisecond))
	}
	slices.Sort(s.before)
	slices.Sort(s.after)
	return s
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

// stages returns the run's stages: commit to publish call, call to its
// return, and the mean rows per call.
func (g *stageTopic) stages(l idemtest.Latency) stages {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := stagesOf(l.Committed, g.sent, g.done)
	if g.calls > 0 {
		s.batch = float64(len(g.sent)) / float64(g.calls)
	}
	return s
}
