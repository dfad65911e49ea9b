package telemetry_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/wary-go/wary/broker"
)

// telArm is one way of running with telemetry: its providers, and what one
// message costs there (filled in by the benchmark).
type telArm struct {
	name    string
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	one     func(i int) // handles message i end to end
	d       time.Duration
	mallocs uint64
}

// telArms are "none" (no provider given and no SDK installed: the global
// no-op), "noop" (no-op providers given) and "sdk" (the SDK: every span
// sampled and batched to an exporter that drops it; metrics to a manual
// reader never collected).
func telArms(b *testing.B) []*telArm {
	sdkTP := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	sdkMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = sdkTP.Shutdown(context.Background()); _ = sdkMP.Shutdown(context.Background()) })
	return []*telArm{{name: "none"}, {name: "noop", tp: tnoop.NewTracerProvider(), mp: mnoop.NewMeterProvider()}, {name: "sdk", tp: sdkTP, mp: sdkMP}}
}

// runArms runs the arms in alternating rounds of 100 messages, each arm
// going first in turn, so that they share the machine's load, and reports
// each arm's time and allocations per message and the overheads over
// "none".
func runArms(b *testing.B, arms []*telArm) {
	const round = 100
	var ms runtime.MemStats
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for k := range arms {
			a := arms[(k+done/round)%len(arms)]
			runtime.ReadMemStats(&ms)
			before, start := ms.Mallocs, time.Now()
			for i := range n {
				a.one(done + i)
			}
			a.d += time.Since(start)
			runtime.ReadMemStats(&ms)
			a.mallocs += ms.Mallocs - before
		}
	}
	b.StopTimer()
	for _, a := range arms {
		b.ReportMetric(float64(a.d.Nanoseconds())/float64(b.N), a.name+"-ns/msg")
		b.ReportMetric(float64(a.mallocs)/float64(b.N), a.name+"-allocs/msg")
	}
	for _, a := range arms[1:] {
		b.ReportMetric(float64(a.d-arms[0].d)/float64(b.N), a.name+"-overhead-ns/msg")
	}
}

func telMessage(i int) *broker.Message {
	return &broker.Message{ID: fmt.Sprint("m", i), Headers: broker.Headers{{"k", "v"}}}
}

// BenchmarkTelemetry measures what instrumentation costs per message on
// the memory broker. sync: Publish, Receive and Ack in one goroutine (send
// span, counters). run: Publish, then Run's handler (send and process
// spans, counters), handed over between goroutines.
func BenchmarkTelemetry(b *testing.B) {
	b.Run("sync", func(b *testing.B) {
		arms := telArms(b)
		for _, a := range arms {
			topic, sub := memBroker(b, a.tp, a.mp)
			ctx := context.Background()
			a.one = func(i int) {
				if err := topic.Publish(ctx, telMessage(i)); err != nil {
					b.Fatal(err)
				}
				ds, err := sub.Receive(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				if err := ds[0].Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		runArms(b, arms)
	})
	b.Run("run", func(b *testing.B) {
		arms := telArms(b)
		for _, a := range arms {
			topic, sub := memBroker(b, a.tp, a.mp)
			handled := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				_ = sub.Run(ctx, func(context.Context, *broker.Delivery) error { handled <- struct{}{}; return nil }, nil)
			}()
			b.Cleanup(func() { cancel(); <-stopped })
			a.one = func(i int) {
				if err := topic.Publish(context.Background(), telMessage(i)); err != nil {
					b.Fatal(err)
				}
				<-handled
			}
		}
		runArms(b, arms)
	})
}
