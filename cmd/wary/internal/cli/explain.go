package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/guarantee"
	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/redact"
)

// pipelineConfig is the --config file: how the application uses wary,
// which the broker and the store cannot tell.
type pipelineConfig struct {
	Outbox       *bool       `json:"outbox"`
	Inbox        *bool       `json:"inbox"`
	Consumer     string      `json:"consumer"`
	Versioned    bool        `json:"versioned"`
	Ordered      bool        `json:"ordered"`
	Concurrency  int         `json:"concurrency"`
	PerKey       bool        `json:"per_key"`
	Retention    duration    `json:"retention"`
	AllowShort   bool        `json:"allow_short_retention"`
	MaxAttempts  int         `json:"max_attempts"`
	Gaps         string      `json:"gaps"`
	EarlyLimit   duration    `json:"early_limit"`
	Relay        relayConfig `json:"relay"`
	Keys         []keyConfig `json:"keys"`
	UnkeyedCalls bool        `json:"unkeyed_calls"`
}

type relayConfig struct {
	MaxAttempts    int      `json:"max_attempts"`
	BackoffInitial duration `json:"backoff_initial"`
	BackoffMax     duration `json:"backoff_max"`
	PublishTimeout duration `json:"publish_timeout"`
}

type keyConfig struct {
	Provider  string   `json:"provider"`
	Retention duration `json:"retention"`
	Replays   bool     `json:"replays"`
}

// duration is a time.Duration written as "30s" in JSON.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

type explainFlags struct {
	store                         storeFlags
	broker, sub, consumer, config string
	outbox, inbox                 bool
	versioned, ordered, perKey    bool
	concurrency                   int
	retention, earlyLimit         time.Duration
	gaps                          string
}

func (a *app) explainCmd() *cobra.Command {
	var f explainFlags
	c := &cobra.Command{
		Use:   "explain --broker URL --subscription URL [--postgres URL | --mysql DSN | --sqlite FILE] [--consumer NAME] [--config FILE]",
		Short: "State a pipeline's end-to-end guarantee and flag its misconfigurations",
		Long: `explain states what one pipeline guarantees, as five lines with a verdict
each (publication, transport, order, consumption, external effects), and
what is left to reconciliation. The transport line comes from the
capabilities the live broker declares, each half from its own side: what a
publisher is promised (the key, the dedup window) from the topic --broker
names, what a consumer is promised (order, the delivery limit, locks, the
redelivery horizon) from the subscription --subscription names. A lock is
stated as its timeout, as "held until settled" (Kafka, sessions), as
unknown where the driver cannot read its bound (RabbitMQ: consumer_timeout,
a server-wide setting, 30 minutes by default, closes the channel of a
consumer that holds a delivery longer, and no interface shows it), or as
"no lock" where the broker hands an unsettled message out again at once
(an SQS FIFO queue with VisibilityTimeout 0): a misconfiguration, since a
handler still running sees its message again, and Run refuses such a
subscription. It also
says what each driver read from the broker and through which interface
(servicebus:// through the administration API, at
$WARY_SERVICEBUS_ADMIN_ENDPOINT for an emulator); a setting the driver could
not read (read_entity=false) is stated as UNKNOWN with how to read it, and
a URL parameter that contradicts the broker is a misconfiguration. So is
a delivery limit past which the broker drops a message, for want of a
dead-letter target ("drops after N deliveries": a RabbitMQ queue with a
delivery limit and no dead-letter exchange): such a message is lost.
Misconfigurations are flagged with their fix, and make the command exit 1.
Where a driver reads the broker (RabbitMQ: the queue's arguments and
policies, through the management API), the transport line states what the
broker holds, a URL parameter that says otherwise is flagged, and what it
could not read is stated as UNKNOWN, with how to make it readable, never as
a default: with management=off RabbitMQ's queue arguments are read over
AMQP, which cannot show x-single-active-consumer nor a delivery-limit
policy, so the order is "order unknown" (through the management API a
queue without it is "no order"), and the order line does not count on
one, and the delivery limit is unknown even where x-delivery-limit is set.
For RabbitMQ it also reads the subscription's dead-letter queue (the one
wary dlq opens): a delivery limit there is flagged, since reading dead
letters counts toward it before RabbitMQ 4.3 and a message past it is
dropped, and a limit it could not read is stated as UNKNOWN.

What the broker and the store cannot tell (handler concurrency, whether
the domain needs order, idempotency-key contracts) comes from flags or
from a JSON --config file:
  {"consumer": "billing", "versioned": true, "ordered": true,
   "concurrency": 4, "per_key": true, "retention": "72h",
   "gaps": "auto", "early_limit": "1h",
   "relay": {"max_attempts": 10, "backoff_max": "5m"},
   "keys": [{"provider": "payments", "retention": "24h", "replays": true}]}
With a store (--postgres or --sqlite), the outbox and the inbox are
assumed, and what is stuck in them now is counted, and so are the
subscription's dead letters where the driver can show them without
receiving them (Service Bus peeks); elsewhere a "now:" line says they were
not counted (wary dlq list receives them and puts them back).

Gaps (--gaps, idem.Options.Gaps): "auto", the default, holds a versioned
event that arrives before its predecessor in the store where the
subscription keeps no order per aggregate (no order, or a queue's order),
and retries it through the broker on an ordered scope; "hold" and "retry"
force either. A held gap is parked after --early-limit
(idem.Options.EarlyLimit, default 1h).

The order line counts what the consumer adds, the same way on every
broker: the handlers see the subscription's order scope unless it keeps
none, could not be read, or concurrent handlers without --per-key (on a
broker without head-of-line blocking) undo it. Where they do not, version
checks that hold gaps in the store restore each aggregate's order [ok],
version checks that retry gaps through the broker park the aggregate until
its missing event is replayed [weak], and without version checks the
order is [broken] (or [weak] where the order could not be read).
--versioned describes the inbox, so it needs one (--inbox, or a store):
without one it is refused (exit 2).`,
		Example: `  wary explain --broker 'mem://orders?profile=queue&limit=5' --subscription mem://orders/billing --sqlite shop.db --consumer billing --ordered --versioned
  wary explain --broker rabbit://orders --subscription 'rabbit://orders.billing?nack_delay=true' --postgres "$WARY_POSTGRES_URL" --config pipeline.json --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, err := a.pipeline(c, &f)
			if err != nil {
				return err
			}
			st, err := a.explain(c.Context(), &f, p, nil, nil)
			if err != nil {
				return err
			}
			return a.report(st, func(w io.Writer) { fmt.Fprint(w, st) }, !st.OK())
		},
	}
	f.add(c)
	return c
}

// add adds the flags that describe the pipeline (explain's and console's).
func (f *explainFlags) add(c *cobra.Command) {
	f.store.add(c)
	c.Flags().StringVar(&f.broker, "broker", "", "URL of the topic the events are published to (required)")
	c.Flags().StringVar(&f.sub, "subscription", "", "URL of the subscription the consumer reads (required)")
	c.Flags().StringVar(&f.consumer, "consumer", "", "the inbox's consumer name")
	c.Flags().StringVar(&f.config, "config", "", "JSON file describing how the application uses wary")
	c.Flags().BoolVar(&f.outbox, "outbox", false, "events go through an outbox and relay (default: true with a store)")
	c.Flags().BoolVar(&f.inbox, "inbox", false, "deliveries go through an inbox (default: true with a store)")
	c.Flags().BoolVar(&f.versioned, "versioned", false, "the inbox checks aggregate versions (idem.Options.Versions); needs an inbox (--inbox or a store)")
	c.Flags().BoolVar(&f.ordered, "ordered", false, "the domain needs each aggregate's events in order")
	c.Flags().BoolVar(&f.perKey, "per-key", false, "handlers run with RunOptions.PerKey")
	c.Flags().IntVar(&f.concurrency, "concurrency", 0, "handlers running at once (default 1)")
	c.Flags().DurationVar(&f.retention, "retention", 0, "inbox retention (default: the redelivery horizon)")
	c.Flags().StringVar(&f.gaps, "gaps", "", "what version checks do with a gap: auto, hold or retry (idem.Options.Gaps; default auto)")
	c.Flags().DurationVar(&f.earlyLimit, "early-limit", 0, "how long a held gap waits before its aggregate is parked (idem.Options.EarlyLimit; default 1h)")
	_ = c.MarkFlagRequired("broker")
	_ = c.MarkFlagRequired("subscription")
}

// pipeline builds the Pipeline from --config and the flags (flags win).
func (a *app) pipeline(c *cobra.Command, f *explainFlags) (guarantee.Pipeline, error) {
	var cfg pipelineConfig
	if f.config != "" {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return guarantee.Pipeline{}, fmt.Errorf("--config: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return guarantee.Pipeline{}, fmt.Errorf("--config %s: %w", f.config, err)
		}
	}
	withStore := a.storeGiven(&f.store)
	pick := func(flag string, flagV bool, cfgV *bool) bool {
		switch {
		case c.Flags().Changed(flag):
			return flagV
		case cfgV != nil:
			return *cfgV
		}
		return withStore
	}
	p := guarantee.Pipeline{
		NeedOrder:    cfg.Ordered || f.ordered,
		Concurrency:  cfg.Concurrency,
		PerKey:       cfg.PerKey || f.perKey,
		UnkeyedCalls: cfg.UnkeyedCalls,
	}
	if pick("outbox", f.outbox, cfg.Outbox) {
		p.Outbox = &guarantee.Outbox{MaxAttempts: cfg.Relay.MaxAttempts, PublishTimeout: time.Duration(cfg.Relay.PublishTimeout),
			Backoff: broker.Backoff{Initial: time.Duration(cfg.Relay.BackoffInitial), Max: time.Duration(cfg.Relay.BackoffMax)}}
	}
	if pick("inbox", f.inbox, cfg.Inbox) {
		p.Inbox = &guarantee.Inbox{Consumer: cfg.Consumer, Retention: time.Duration(cfg.Retention), MaxAttempts: cfg.MaxAttempts,
			Versioned: cfg.Versioned || f.versioned}
		if f.consumer != "" {
			p.Inbox.Consumer = f.consumer
		}
		if f.retention != 0 {
			p.Inbox.Retention = f.retention
		}
		p.Inbox.EarlyLimit = cmp.Or(f.earlyLimit, time.Duration(cfg.EarlyLimit), idem.DefaultEarlyLimit)
		if f.gaps = cmp.Or(f.gaps, cfg.Gaps, "auto"); f.gaps != "auto" && f.gaps != "hold" && f.gaps != "retry" {
			return p, fmt.Errorf("gaps %q: want auto, hold or retry", f.gaps)
		}
	}
	if f.concurrency != 0 {
		p.Concurrency = f.concurrency
	}
	for _, k := range cfg.Keys {
		p.Keys = append(p.Keys, keys.Contract{Provider: k.Provider, Retention: time.Duration(k.Retention), Replays: k.Replays})
	}
	if p.Inbox == nil && (cfg.Versioned || f.versioned) {
		return p, errors.New("--versioned: version checks are the inbox's (idem.Options.Versions), and this pipeline has none: pass --inbox with --consumer (or a store), or drop --versioned")
	}
	if p.Inbox != nil && p.Inbox.Consumer == "" {
		return p, errors.New("name the inbox's consumer with --consumer (or \"consumer\" in --config), or pass --inbox=false")
	}
	return p, nil
}

// explain reads the live capabilities (and the backlog of d, or of the
// store the flags name when d is nil) and states the guarantee. dead, if
// set, is the subscription's dead letters as already peeked (the
// console's dashboard counts them too), else explain peeks itself.
func (a *app) explain(ctx context.Context, f *explainFlags, p guarantee.Pipeline, d *db, dead *deadPeek) (guarantee.Statement, error) {
	// Each half of the broker's promise is read from its own side: the
	// publish half from the topic, the delivery half from the consumer's
	// subscription.
	t, err := a.openTopic(ctx, f.broker)
	if err != nil {
		return guarantee.Statement{}, err
	}
	tc := t.Capabilities()
	_ = t.Close()
	p.Topic = &tc
	s, err := a.openSubscription(ctx, f.sub)
	if err != nil {
		return guarantee.Statement{}, err
	}
	sc := s.Capabilities()
	_ = s.Close()
	p.Subscription = &sc
	p.Broker = redact.String(f.broker)
	if p.Inbox != nil {
		// idem.GapsAuto's rule: hold where the subscription keeps no
		// order per aggregate (PostgreSQL and SQLite stores can hold).
		p.Inbox.HoldsGaps = f.gaps == "hold" || f.gaps == "auto" && (sc.Ordering == capability.OrderNone || sc.Ordering == capability.OrderQueue)
	}
	st := guarantee.Explain(p)
	a.deadLetterLimit(ctx, f.sub, &st)
	if d == nil {
		if !a.storeGiven(&f.store) {
			return st, nil
		}
		if d, err = a.openStore(ctx, &f.store); err != nil {
			return st, err
		}
		defer d.close()
	}
	if p.Outbox != nil {
		h, err := outboxHealth(ctx, d)
		if err != nil {
			return st, fmt.Errorf("outbox: %w", err)
		}
		st.Reconcile = append(st.Reconcile, fmt.Sprintf("now: outbox backlog %d, %d quarantined, oldest unsent %s", h.Backlog, h.Quarantined, age(h.oldestAge, h.OldestUnsent)))
		if h.Stream != nil { // a relay on a store with postgres.SourceOptions.Stream: the slot's lag
			st.Reconcile = append(st.Reconcile, "now: outbox "+h.Stream.String())
		}
	}
	if p.Inbox != nil {
		n, err := d.CountParked(ctx, p.Inbox.Consumer, idem.ParkedFilter{})
		if err != nil {
			return st, fmt.Errorf("parked: %w", err)
		}
		st.Reconcile = append(st.Reconcile, fmt.Sprintf("now: %d parked message(s) of consumer %q", n, p.Inbox.Consumer))
		if p.Inbox.Versioned && p.Inbox.HoldsGaps {
			es, err := d.Early(ctx, p.Inbox.Consumer, 0)
			if err != nil {
				return st, fmt.Errorf("early events: %w", err)
			}
			held := 0
			for _, e := range es {
				held += e.Held
			}
			st.Reconcile = append(st.Reconcile, fmt.Sprintf("now: %d early event(s) of %d aggregate(s) held for consumer %q (wary parked early)", held, len(es), p.Inbox.Consumer))
		}
	}
	if sc.DeadLetter {
		if dead == nil {
			pk := a.peekDeadLetters(ctx, f.sub)
			dead = &pk
		}
		st.Reconcile = append(st.Reconcile, dead.now())
	}
	return st, nil
}

// deadCountCap bounds how many dead letters the statement counts.
const deadCountCap = 1000

// deadPeek is one count of a subscription's dead letters by peeking
// (nothing changes: no lock, no delivery count): n, up to deadCountCap,
// or why they were not counted (errors.ErrUnsupported: the driver cannot
// show them without receiving them).
type deadPeek struct {
	n   int
	err error
}

// peekDeadLetters counts the dead letters of the subscription raw by
// peeking, up to deadCountCap.
func (a *app) peekDeadLetters(ctx context.Context, raw string) deadPeek {
	s, err := a.openDeadLetters(ctx, raw)
	if err != nil {
		return deadPeek{err: err}
	}
	defer s.Close()
	return peekCount(ctx, s)
}

// peekCount counts the dead letters of s, opened with openDeadLetters, by
// peeking, up to deadCountCap, keeping none.
func peekCount(ctx context.Context, s *broker.Subscription) deadPeek {
	n := 0
	for n < deadCountCap {
		ps, err := s.Peek(ctx, min(deadCountCap-n, 100))
		if err != nil {
			return deadPeek{err: err} // ErrUnsupported only at the first (a subscription with sessions)
		}
		if len(ps) == 0 {
			break
		}
		n += min(len(ps), deadCountCap-n)
	}
	return deadPeek{n: n}
}

// now is the statement's "now:" line of the dead letters p counted.
func (p deadPeek) now() string {
	switch {
	case errors.Is(p.err, errors.ErrUnsupported):
		return "now: dead letters not counted: the driver cannot show them without receiving them (wary dlq list receives them and puts them back)"
	case p.err != nil:
		return "now: dead letters not counted: " + redactErr(p.err)
	case p.n >= deadCountCap:
		return fmt.Sprintf("now: %d or more dead letter(s) (wary dlq list)", p.n)
	}
	return fmt.Sprintf("now: %d dead letter(s) (wary dlq list)", p.n)
}

func age(d time.Duration, since time.Time) string {
	if since.IsZero() {
		return "none"
	}
	return d.Round(time.Second).String() + " old"
}
