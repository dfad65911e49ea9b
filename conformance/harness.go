package conformance

import (
	"context"
	"time"

	"github.com/wary-go/wary/broker"
)

// T is what a scenario and a harness use of the test they run in: the
// part of testing.TB the suite needs. *testing.T implements it under
// Run; under Probe the suite hands in a reporter of its own, so that a
// program probing a live broker does not link package testing. FailNow,
// Fatal, Fatalf, SkipNow, Skip and Skipf end the calling goroutine, as in
// go test, and so may only be called from the goroutine running the
// scenario or the harness's Setup.
type T interface {
	Helper()
	Name() string
	Context() context.Context
	Cleanup(func())
	Log(args ...any)
	Logf(format string, args ...any)
	Error(args ...any)
	Errorf(format string, args ...any)
	Fail()
	FailNow()
	Failed() bool
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Skipf(format string, args ...any)
	SkipNow()
	Skipped() bool
	TempDir() string
}

// Harness is how a driver's tests hand the suite its broker.
type Harness struct {
	// Name names the run in reports (e.g. "rabbit/quorum").
	Name string
	// Setup creates a fresh, empty topic and subscription (or queue) for one
	// scenario, configured as cfg asks where the broker makes that
	// configurable, and returns handles to them. The harness registers its
	// own cleanup with t.Cleanup. Capabilities reported by the fixture's
	// topic and subscriptions must reflect the configuration actually
	// applied (e.g. the lock timeout that was set).
	Setup func(ctx context.Context, t T, cfg Config) (*Fixture, error)
	// Wait lets d of broker time pass. Memory drivers on a fake clock
	// advance it; real brokers sleep. Nil means a context-aware sleep.
	Wait func(ctx context.Context, d time.Duration)
	// Quiet is how long a receive must find nothing before the suite
	// concludes that nothing is deliverable (default 1s).
	Quiet time.Duration
	// MaxWait is the most broker time one scenario may wait (for a lock,
	// a nack delay or a dedup window to pass; default 30s). A scenario that
	// would need longer fails: the harness is expected to configure its
	// broker short enough (Config says how short), unless FixedWaits says
	// why it cannot.
	MaxWait time.Duration
	// FixedWaits, when not empty, says why the broker's lock timeout or
	// dedup window cannot be configured shorter than MaxWait allows (e.g.
	// "a real server whose dedup window is fixed at 10 minutes"). A
	// scenario that would wait longer is then reported as not applicable,
	// with this reason, instead of failing.
	FixedWaits string
	// RedeliveryHorizon is the redelivery horizon the harness configured
	// on its broker, which the topic and subscriptions must declare: a
	// retention it set, capability.HorizonUnbounded where the broker keeps a
	// message until it is settled (a RabbitMQ quorum queue, a Kafka topic
	// with retention.ms=-1), or capability.HorizonUnknown (the zero value)
	// where the driver cannot read it. The suite cannot measure a horizon
	// by waiting, so it compares the declaration with this truth
	// (scenario redelivery-horizon).
	RedeliveryHorizon time.Duration
	// HorizonNotKnown, when not empty, says why the harness cannot state
	// the horizon its broker applies (e.g. a shared server whose retention
	// it does not set); scenario redelivery-horizon is then not applicable,
	// with this reason.
	HorizonNotKnown string
	// OpenMissingTopic opens a topic that does not exist. Nil: the scenario
	// is reported as not applicable.
	OpenMissingTopic func(ctx context.Context) (*broker.Topic, error)
	// OpenMissingSubscription opens a subscription that does not exist.
	OpenMissingSubscription func(ctx context.Context) (*broker.Subscription, error)
}

// Config is what a scenario asks of the fixture. A harness applies what its
// broker can set and ignores the rest; the suite reads the truth from
// Capabilities.
type Config struct {
	// LockTimeout is the lock or visibility timeout wanted (short, e.g. 2s).
	LockTimeout time.Duration
	// DeliveryLimit is the delivery limit wanted (e.g. 3).
	DeliveryLimit int
	// DedupWindow is the dedup window wanted (short, where configurable).
	DedupWindow time.Duration
}

// Fixture is one scenario's topic and subscription.
type Fixture struct {
	Topic *broker.Topic
	// Subscribe opens one more competing consumer on the scenario's
	// subscription. The suite closes what it opens.
	Subscribe func(ctx context.Context) (*broker.Subscription, error)
	// DeadLetters opens a consumer on the subscription's dead-letter queue.
	// Nil when the driver has none.
	DeadLetters func(ctx context.Context) (*broker.Subscription, error)
}
