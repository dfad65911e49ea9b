// Package guarantee states what a pipeline guarantees end to end, from the
// producer's transaction to the consumer's effects, and finds its
// misconfigurations: five lines with a verdict each (publication,
// transport, order, consumption, external effects), what is left to
// reconciliation, and each misconfiguration with its fix (a retention
// shorter than the redelivery horizon, no delivery limit, ordering needed
// on a broker without a scope or with concurrent handlers without PerKey
// and nothing that checks versions, a broker dedup window shorter than
// the relay's retry span, a delivery limit past which the broker drops
// messages because the subscription has no dead-letter target).
//
// A program gets its statement from what it built: an inbox's
// (idem.Inbox.Statement) and a relay's (outbox.Relay.Statement), which
// they also log once when they start, at Warn when something is
// misconfigured. Explain states a pipeline described by hand, as the wary
// command (cmd/wary explain) does for a live broker and store.
package guarantee

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/internal/defaults"
	"github.com/wary-go/wary/idem/keys"
)

// Pipeline describes one pipeline, from the producer's transaction to the
// consumer's effects, for Explain. The zero value is a direct publish to a
// broker that promises nothing, consumed without an inbox.
type Pipeline struct {
	// Broker names the broker for the statement (a URL already redacted
	// with redact.URL; never one with a password).
	Broker string
	// Topic is the publish half of the broker's promise, as the topic the
	// events are published to declares it (topic.Capabilities()): the
	// key, the dedup window. Nil: not stated, as in a consumer's own
	// statement.
	Topic *capability.Topic
	// Subscription is the delivery half, as the subscription the consumer
	// reads declares it (sub.Capabilities()): order as delivered, the
	// delivery limit, dead letters, locks, the redelivery horizon. Nil: not
	// stated, as in a relay's own statement; the stages that need it say
	// so, and find nothing in it.
	Subscription *capability.Subscription
	// Outbox, if set: events are written in the domain transaction through
	// an outbox and published by a relay that retries as it says. Nil: a
	// producer publishes directly, a dual write.
	Outbox *Outbox
	// Inbox, if set: the consumer processes deliveries through an inbox
	// configured as it says. Nil: every redelivery runs the handler again.
	Inbox *Inbox
	// NeedOrder: the domain needs each aggregate's events applied in
	// order.
	NeedOrder bool
	// Concurrency is how many handlers run at once (RunOptions.Concurrency;
	// 0 means 1), and PerKey whether they are serialised per key.
	Concurrency int
	PerKey      bool
	// Keys are the contracts of the providers the handlers call with
	// idempotency keys (idem/keys), and UnkeyedCalls says that handlers
	// make external calls without one.
	Keys         []keys.Contract
	UnkeyedCalls bool
}

// Outbox is how a pipeline's relay retries a row it fails to publish
// (outbox.RelayOptions); a zero field means the relay's default, as
// outbox.RelayOptions states it (the relay and the statement apply the
// same one).
type Outbox struct {
	// MaxAttempts failed publishes quarantine a row.
	MaxAttempts int
	// Backoff spaces the attempts.
	Backoff broker.Backoff
	// PublishTimeout bounds each attempt.
	PublishTimeout time.Duration
}

// Inbox is how a pipeline's consumer uses its inbox (idem.Options, and
// its handlers); a zero field means the inbox's default, as idem.Options
// states it.
type Inbox struct {
	// Consumer names the inbox's consumer.
	Consumer string
	// Retention is how long claims are kept (default: the subscription's
	// redelivery horizon).
	Retention time.Duration
	// MaxAttempts is how many times a gap is retried before the message
	// is parked.
	MaxAttempts int
	// Versioned: the inbox checks aggregate versions (idem.Options.Versions,
	// CheckVersion), so duplicates and stale events are told apart and
	// gaps are retried, then parked.
	Versioned bool
	// HoldsGaps: a gap is held in the store (idem.Options.Gaps), not
	// retried through the broker, so no delivery limit applies to it.
	HoldsGaps bool
	// EarlyLimit is how long a held gap waits for its predecessor before
	// the aggregate is parked (idem.Options.EarlyLimit; 0: not stated).
	EarlyLimit time.Duration
}

// Verdict grades one line of a Statement.
type Verdict string

// Verdicts, from best to worst.
const (
	// VerdictOK: the stage keeps its promise as configured.
	VerdictOK Verdict = "ok"
	// VerdictWeak: the stage holds, but leaves something to an operator or
	// to reconciliation.
	VerdictWeak Verdict = "weak"
	// VerdictBroken: effects can be lost, duplicated or reordered.
	VerdictBroken Verdict = "broken"
)

// Line is one stage of the statement.
type Line struct {
	Stage   string  `json:"stage"`
	Verdict Verdict `json:"verdict"`
	Text    string  `json:"text"`
}

// Finding is a misconfiguration, with the fix.
type Finding struct {
	Stage   string `json:"stage"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Statement is a pipeline's end-to-end guarantee: five lines (publication,
// transport, order, consumption, external effects), what is left to
// reconciliation, and the misconfigurations found. Its String form is for
// people and logs; it marshals to JSON for scripts.
type Statement struct {
	Broker    string    `json:"broker,omitempty"`
	Lines     []Line    `json:"lines"`
	Reconcile []string  `json:"reconciliation"`
	Findings  []Finding `json:"findings"`
	// Unread are the broker's settings its driver could not read (each
	// with how to make it readable): the statement does not take the
	// URL's or options' word for them. They are not findings.
	Unread []Finding `json:"unread"`
}

// OK reports whether Explain found no misconfiguration.
func (s Statement) OK() bool { return len(s.Findings) == 0 }

// String renders the statement, one line per stage.
func (s Statement) String() string {
	var b strings.Builder
	if s.Broker != "" {
		fmt.Fprintf(&b, "pipeline on %s\n", s.Broker)
	}
	for _, l := range s.Lines {
		fmt.Fprintf(&b, "%-12s [%s] %s\n", l.Stage+":", l.Verdict, l.Text)
	}
	if len(s.Reconcile) > 0 {
		b.WriteString("left to reconciliation:\n")
		for _, r := range s.Reconcile {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	for _, u := range s.Unread {
		fmt.Fprintf(&b, "UNKNOWN (%s): %s\n  to read it: %s\n", u.Stage, u.Problem, u.Fix)
	}
	if len(s.Findings) == 0 {
		b.WriteString("no misconfiguration found\n")
	}
	for _, f := range s.Findings {
		fmt.Fprintf(&b, "MISCONFIGURED (%s): %s\n  fix: %s\n", f.Stage, f.Problem, f.Fix)
	}
	return b.String()
}

// MarshalJSON keeps empty lists as [] rather than null.
func (s Statement) MarshalJSON() ([]byte, error) {
	type plain Statement
	p := plain(s)
	if p.Reconcile == nil {
		p.Reconcile = []string{}
	}
	if p.Findings == nil {
		p.Findings = []Finding{}
	}
	if p.Unread == nil {
		p.Unread = []Finding{}
	}
	return json.Marshal(p)
}

// LogValue logs the statement as a group of its lines and findings.
func (s Statement) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(s.Lines)+2)
	for _, l := range s.Lines {
		attrs = append(attrs, slog.String(l.Stage, string(l.Verdict)+": "+l.Text))
	}
	if len(s.Reconcile) > 0 {
		attrs = append(attrs, slog.String("reconciliation", strings.Join(s.Reconcile, "; ")))
	}
	for i, f := range s.Findings {
		attrs = append(attrs, slog.String(fmt.Sprintf("misconfigured.%d", i+1), f.Problem+"; fix: "+f.Fix))
	}
	for i, u := range s.Unread {
		attrs = append(attrs, slog.String(fmt.Sprintf("unknown.%d", i+1), u.Problem+"; to read it: "+u.Fix))
	}
	return slog.GroupValue(attrs...)
}

// Explain states what p guarantees end to end, stage by stage, and flags
// its misconfigurations with their fix. It reads nothing but p: give it the
// capabilities the live topic and subscription declare, each half from
// its own side.
func Explain(p Pipeline) Statement {
	e := explainer{p: p, st: Statement{Broker: p.Broker}}
	e.publication()
	e.transport()
	e.order()
	e.consumption()
	e.effects()
	return e.st
}

type explainer struct {
	p  Pipeline
	st Statement
}

func (e *explainer) line(stage string, v Verdict, format string, args ...any) {
	e.st.Lines = append(e.st.Lines, Line{Stage: stage, Verdict: v, Text: fmt.Sprintf(format, args...)})
}

func (e *explainer) finding(stage, problem, fix string) {
	e.st.Findings = append(e.st.Findings, Finding{Stage: stage, Problem: problem, Fix: fix})
}

func (e *explainer) reconcile(format string, args ...any) {
	e.st.Reconcile = append(e.st.Reconcile, fmt.Sprintf(format, args...))
}

// withDefaults returns o (nil: the zero value) with the relay's defaults
// applied.
func (o *Outbox) withDefaults() Outbox {
	var r Outbox
	if o != nil {
		r = *o
	}
	defaults.Relay(&r.MaxAttempts, &r.Backoff, &r.PublishTimeout)
	return r
}

// RetrySpan is the longest a relay retrying as o says (nil: the defaults)
// may go on publishing one row: every attempt's timeout and every backoff
// ceiling up to the attempt that quarantines it. A broker's dedup window
// shorter than this lets a republished row through as a second message.
func (o *Outbox) RetrySpan() time.Duration {
	r := o.withDefaults()
	span := satMul(r.PublishTimeout, r.MaxAttempts)
	// The ceilings grow to Backoff's cap and stay there: sum them until
	// then, and the rest in one step (MaxAttempts may be huge).
	for a := 1; a < r.MaxAttempts; a++ {
		c := r.Backoff.Ceiling(a)
		if c == r.Backoff.Ceiling(a+1) {
			return satAdd(span, satMul(c, r.MaxAttempts-a))
		}
		span = satAdd(span, c)
	}
	return span
}

func (e *explainer) publication() {
	if e.p.Outbox == nil {
		e.line("publication", VerdictBroken, "direct publish after commit: a dual write; a crash between the commit and the publish loses the event, and a publish before a rollback sends one that never happened")
		e.finding("publication", "events are published directly, not through an outbox", "write them with outbox.New(...).Add in the domain transaction and run an outbox.NewRelay")
		return
	}
	r := e.p.Outbox.withDefaults()
	e.line("publication", VerdictOK, "outbox in the domain transaction, relay publishes each committed event at least once, in aggregate order; a row failing %d times (for up to %s) is quarantined and blocks only its aggregate",
		r.MaxAttempts, short(e.p.Outbox.RetrySpan().Round(time.Second)))
	e.reconcile("quarantined outbox rows (wary outbox list --state quarantined; requeue or discard)")
}

func (e *explainer) transport() {
	t, c := e.p.Topic, e.p.Subscription
	var parts []string
	v := VerdictOK
	key := ""
	if t != nil {
		key = t.OrderingKey
	}
	switch {
	case c == nil && key != "":
		parts = append(parts, "keyed by "+key)
	case c == nil:
	case c.Source.IsUnread(capability.SettingOrdering):
		// Never the field's value: the driver could not read the order.
		parts = append(parts, "order unknown")
	case c.Ordering == capability.OrderNone:
		parts = append(parts, "no order")
	case key != "":
		parts = append(parts, fmt.Sprintf("order per %s (key %s)", c.Ordering, key))
	default:
		parts = append(parts, fmt.Sprintf("order per %s", c.Ordering))
	}
	if t != nil {
		switch {
		case t.Source.IsUnread(capability.SettingDedupWindow):
			parts = append(parts, "broker dedup unknown")
		case t.DedupWindow > 0:
			parts = append(parts, fmt.Sprintf("dedup of IDs for %s per %s", short(t.DedupWindow), t.DedupScope))
		default:
			parts = append(parts, "no broker dedup")
		}
		if e.p.Outbox != nil && t.DedupWindow > 0 && e.p.Inbox == nil && !t.Source.IsUnread(capability.SettingDedupWindow) {
			if span := e.p.Outbox.RetrySpan(); t.DedupWindow < span {
				v = VerdictBroken
				e.finding("transport", fmt.Sprintf("the broker's dedup window (%s) is shorter than the relay's retry span (%s): a row republished later reaches the consumer twice, and nothing downstream drops it", short(t.DedupWindow), short(span.Round(time.Second))),
					"consume through an idem.Inbox, or lower outbox.RelayOptions.MaxAttempts and Backoff.Max so that the span fits in the window")
			}
		}
	}
	if c != nil {
		parts = append(parts, e.delivery(c, &v)...)
	} else {
		parts = append(parts, "delivery not stated here (the consumer's subscription states it)")
	}
	var read []string
	if t != nil {
		if r := e.source("topic", t.Source, &v); r != "" {
			read = append(read, r)
		}
	}
	if c != nil {
		if r := e.source("subscription", c.Source, &v); r != "" {
			read = append(read, r)
		}
	}
	text := "at least once; " + strings.Join(parts, ", ")
	if len(read) > 0 {
		text += "; " + strings.Join(read, "; ")
	}
	e.line("transport", v, "%s", text)
}

// delivery is the transport's delivery half after the order (limit, lock,
// horizon), which may lower v.
func (e *explainer) delivery(c *capability.Subscription, v *Verdict) []string {
	var parts []string
	src := c.Source
	limitUnread := src.IsUnread(capability.SettingDeliveryLimit)
	switch {
	case limitUnread:
		parts = append(parts, "delivery limit unknown")
	case c.DeliveryLimit > 0 && src.IsUnread(capability.SettingDeadLetter):
		parts = append(parts, fmt.Sprintf("ends a message after %d deliveries (%s; dead-letter target unknown)", c.DeliveryLimit, c.DeliveryLimitMode))
	case c.DeliveryLimit > 0 && c.DeadLetter:
		parts = append(parts, fmt.Sprintf("dead-letters after %d deliveries (%s)", c.DeliveryLimit, c.DeliveryLimitMode))
	case c.DeliveryLimit > 0:
		// The loss side: past the limit the broker deletes the message,
		// and nothing is left to park, replay or reconcile.
		parts = append(parts, fmt.Sprintf("drops after %d deliveries (%s)", c.DeliveryLimit, c.DeliveryLimitMode))
		*v = VerdictBroken
		e.finding("transport", fmt.Sprintf("the subscription drops a message after %d deliveries: it has no dead-letter target, so a message whose handler keeps failing is deleted by the broker, neither dead-lettered nor parked, and nothing is left to replay", c.DeliveryLimit),
			"give the subscription a dead-letter target that keeps what passes the limit for wary dlq (RabbitMQ: a dead-letter-exchange policy or x-dead-letter-exchange on the queue, bound to a queue; SQS: a redrive policy; Kafka: a dead-letter topic)")
	default:
		parts = append(parts, "no delivery limit")
	}
	switch {
	case src.IsUnread(capability.SettingLockTimeout):
		parts = append(parts, "lock unknown")
	case c.LockTimeout == capability.LockNone:
		parts = append(parts, "no lock (an unsettled delivery is visible again at once)")
		*v = VerdictBroken
		e.finding("transport", "no lock: each delivery is visible again at once, so a handler still running sees its message received again (and counted toward the delivery limit); Subscription.Run refuses the subscription",
			"give the queue a lock longer than a handler runs (SQS: a VisibilityTimeout above 0)")
	case c.LockTimeout > 0:
		ext := ""
		if c.LockExtendable {
			ext = ", extendable"
		}
		parts = append(parts, fmt.Sprintf("lock %s%s", short(c.LockTimeout), ext))
	default:
		parts = append(parts, "held until settled")
	}
	if src.IsUnread(capability.SettingRedeliveryHorizon) {
		parts = append(parts, "redelivery horizon unknown")
	} else {
		parts = append(parts, "redelivery horizon "+horizon(c.RedeliveryHorizon))
	}
	if c.DeliveryLimit <= 0 && !limitUnread {
		*v = VerdictBroken
		e.finding("transport", "no delivery limit: a message whose handler always fails is redelivered for ever and holds its scope",
			"configure one on the broker (RabbitMQ quorum queue x-delivery-limit, SQS redrive maxReceiveCount, Service Bus MaxDeliveryCount, Kafka retry and dead-letter topics, the memory driver's limit=N)")
	}
	if c.DeadLetter {
		e.reconcile("dead-lettered messages (wary dlq list; replay or discard)")
	}
	return parts
}

// order states the order the handlers apply an aggregate's events in, in
// one model for every broker: what reaches the handlers in order is the
// broker's order scope, unless it keeps none, could not be read, or
// concurrent handlers without PerKey (on a broker without head-of-line
// blocking) undo it. Where it does not, what the consumer side adds
// decides: version checks that hold gaps in the store apply the events in
// version order (ok), version checks that retry gaps through the broker
// park an aggregate until its missing event is replayed (weak), and
// nothing is broken, or weak where the broker's order is unknown.
func (e *explainer) order() {
	c := e.p.Subscription
	conc := max(e.p.Concurrency, 1)
	if !e.p.NeedOrder {
		e.line("order", VerdictOK, "not needed by the domain (%d handler(s) at once)", conc)
		return
	}
	if c == nil {
		e.line("order", VerdictWeak, "needed; the order the broker delivers in is not stated here (the consumer's subscription states it)")
		return
	}
	unread := c.Source.IsUnread(capability.SettingOrdering)
	reordered := conc > 1 && !e.p.PerKey && !c.HeadOfLine
	perKey := Finding{Stage: "order", Problem: fmt.Sprintf("%d concurrent handlers without PerKey on a broker without head-of-line blocking", conc),
		Fix: "set broker.RunOptions.PerKey (one handler per key at a time), run one handler, or check versions in an inbox that holds gaps (idem.Options.Versions, Gaps)"}
	// cause: why the handlers may see an aggregate's events out of order;
	// broken: the finding where nothing else restores the order.
	var cause string
	var broken *Finding
	switch {
	case unread && reordered:
		cause = fmt.Sprintf("the order the broker delivers in could not be read (see UNKNOWN), and %d concurrent handlers without PerKey apply an aggregate's events in any order whatever it is", conc)
		broken = &perKey
	case unread:
		cause = "the order the broker delivers in could not be read (see UNKNOWN)"
	case c.Ordering == capability.OrderNone:
		cause = "the broker keeps no order"
		broken = &Finding{Stage: "order", Problem: "ordering is needed but the broker declares no ordering scope",
			Fix: "use an ordered broker (RabbitMQ single-active-consumer queue, Kafka keyed partitions, SQS FIFO message groups, Service Bus sessions), or check versions in an inbox (idem.Options.Versions)"}
	case reordered:
		cause = fmt.Sprintf("the broker orders per %s, but %d concurrent handlers without PerKey apply an aggregate's events in any order", c.Ordering, conc)
		broken = &perKey
	}
	holds := e.p.versioned() && e.p.Inbox.HoldsGaps
	switch {
	case !unread && cause == "":
		how := "one handler at a time"
		switch {
		case c.HeadOfLine:
			how = "the broker holds a scope while a message of it is unsettled"
		case conc > 1:
			how = "PerKey serialises each key's handlers"
		}
		text := fmt.Sprintf("per aggregate: the outbox keys messages by aggregate, the broker orders per %s, %s", c.Ordering, how)
		if e.p.versioned() {
			text += "; version checks catch what still arrives out of order"
		}
		e.line("order", VerdictOK, "%s", text)
	case holds:
		e.line("order", VerdictOK, "%s; version checks hold an early event in the store and apply it after its predecessor, in version order, and park the aggregate if the gap stays open", cause)
	case e.p.versioned():
		e.line("order", VerdictWeak, "%s; version checks detect gaps, retry them and park the aggregate until the missing event arrives and it is replayed", cause)
	case broken != nil:
		e.line("order", VerdictBroken, "needed, but %s, and nothing checks versions: events of an aggregate are applied in any order", cause)
		e.st.Findings = append(e.st.Findings, *broken)
	default: // unread, no version checks
		e.line("order", VerdictWeak, "needed, but %s, and nothing checks versions: if the broker keeps none, events of an aggregate are applied in any order", cause)
	}
}

func (e *explainer) consumption() {
	// Without the subscription's half, the horizon and the delivery limit
	// are unknown here, and nothing is found in them.
	var c capability.Subscription
	known := e.p.Subscription != nil
	if known {
		c = *e.p.Subscription
	}
	if e.p.Inbox == nil {
		e.line("consumption", VerdictBroken, "no inbox: every redelivery and broker duplicate runs the handler again")
		e.finding("consumption", "deliveries are handled without an inbox", "wrap the handler in an inbox: sub.Run(ctx, idem.NewInbox(store, consumer, sub.Capabilities(), opts).Wrap(h), runOpts)")
		return
	}
	o := *e.p.Inbox
	v := VerdictOK
	h := c.RedeliveryHorizon
	ret := o.Retention
	switch {
	case h == capability.HorizonUnknown && ret == 0 && known:
		v = VerdictBroken
		e.finding("consumption", "the redelivery horizon is unknown and no retention is set: NewInbox refuses to start", "set Options.Retention to longer than any redelivery you expect")
	case ret == 0:
		ret = h
	case h != capability.HorizonUnknown && ret < h:
		v = VerdictBroken
		e.finding("consumption", fmt.Sprintf("inbox retention %s is shorter than the redelivery horizon %s: a copy arriving after its record is purged runs again", horizon(ret), horizon(h)),
			"raise Options.Retention to the horizon (0 keeps it) and drop AllowShortRetention")
	}
	maxAttempts := o.MaxAttempts
	defaults.InboxMaxAttempts(&maxAttempts)
	if o.Versioned && !o.HoldsGaps && known && c.DeliveryLimit > 0 && maxAttempts > c.DeliveryLimit && !c.Source.IsUnread(capability.SettingDeliveryLimit) {
		// Each gap retry is a nack, so a broker delivery: the broker's
		// limit comes first and the message leaves the queue unparked.
		fate := "dead-lettered"
		if !c.DeadLetter {
			fate, v = "dropped", VerdictBroken
		} else if v == VerdictOK {
			v = VerdictWeak
		}
		e.finding("consumption", fmt.Sprintf("version checks retry a gap up to %d times but the broker ends a message after %d deliveries (each retry is one): an event waiting for its predecessor is %s instead of parked", maxAttempts, c.DeliveryLimit, fate),
			fmt.Sprintf("set Options.MaxAttempts to at most %d, or raise the broker's delivery limit", c.DeliveryLimit))
	}
	text := fmt.Sprintf("inbox %q claims each message ID in the handler's transaction, records kept %s (horizon %s)", o.Consumer, horizon(ret), horizon(h))
	if o.Versioned {
		if o.HoldsGaps {
			limit := ""
			if o.EarlyLimit > 0 {
				limit = " for up to " + short(o.EarlyLimit)
			}
			text += "; version checks ack duplicates and stale events, hold gaps in the store (acked on the broker, never retried through it)" + limit +
				" until the predecessor is applied, then park the aggregate if it does not come"
		} else {
			text += fmt.Sprintf("; version checks ack duplicates and stale events, retry gaps %d times, then park the aggregate", maxAttempts)
		}
		e.reconcile("parked messages (wary parked list; replay or discard)")
		if o.HoldsGaps {
			e.reconcile("early events held in the store for their predecessor (wary parked early), parked after the early limit")
		}
	} else {
		text += "; no version checks: an event older than the aggregate's state is applied over it"
	}
	e.line("consumption", v, "%s", text)
}

func (e *explainer) effects() {
	if len(e.p.Keys) == 0 && !e.p.UnkeyedCalls {
		e.line("effects", VerdictOK, "no external calls declared: every effect is in the consumer's transaction, applied once")
		return
	}
	var parts []string
	v := VerdictOK
	for _, k := range e.p.Keys {
		kept := "for ever"
		if k.Retention > 0 {
			kept = short(k.Retention)
		}
		if k.Replays {
			parts = append(parts, fmt.Sprintf("%s (remembers keys %s and replays outcomes: unknown outcomes are retried within that)", k.Provider, kept))
		} else {
			v = VerdictWeak
			parts = append(parts, fmt.Sprintf("%s (does not replay outcomes: an unknown outcome waits for reconciliation)", k.Provider))
		}
		e.reconcile("idempotency keys of %s whose outcome is unknown (keys.Caller: Unresolved, Reconcile)", k.Provider)
	}
	text := "external calls with idempotency keys stored before the call: " + strings.Join(parts, "; ")
	if e.p.UnkeyedCalls {
		v = VerdictBroken
		text = "external calls without idempotency keys run again on every retry and redelivery"
		if len(parts) > 0 {
			text += "; keyed: " + strings.Join(parts, "; ")
		}
		e.finding("effects", "handlers make external calls without idempotency keys", "stage a key with keys.New(...).Stage in the handler's transaction and make the call with Caller.Call")
	}
	e.line("effects", v, "%s", text)
}

// Stages is s restricted to the given stages' lines and findings, for
// the statement an inbox or a relay logs at start-up, which knows only its
// own side.
func (s Statement) Stages(stages ...string) Statement {
	out := Statement{Broker: s.Broker}
	for _, l := range s.Lines {
		if slices.Contains(stages, l.Stage) {
			out.Lines = append(out.Lines, l)
		}
	}
	for _, f := range s.Findings {
		if slices.Contains(stages, f.Stage) {
			out.Findings = append(out.Findings, f)
		}
	}
	for _, u := range s.Unread {
		if slices.Contains(stages, u.Stage) {
			out.Unread = append(out.Unread, u)
		}
	}
	return out
}

// versioned reports whether the pipeline's inbox checks versions.
func (p Pipeline) versioned() bool { return p.Inbox != nil && p.Inbox.Versioned }

// Level is the level to log s at: Info, or Warn when it has findings.
func (s Statement) Level() slog.Level {
	if s.OK() {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
