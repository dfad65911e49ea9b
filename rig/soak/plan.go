package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wary-go/wary/conformance"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds; see the package documentation.
const (
	Rebalance     Kind = "rebalance"
	ConsumerKill  Kind = "consumer-kill"
	RelayKill     Kind = "relay-kill"
	DatabaseReset Kind = "database-reset"
	BrokerReset   Kind = "broker-reset"
	BrokerRestart Kind = "broker-restart"
	LockExpiry    Kind = "lock-expiry"
)

// step is one scheduled fault: at is the fraction of messages applied
// that triggers it.
type step struct {
	kind Kind
	at   float64
	down bool // Rebalance: shrink to one consumer (else grow to three)
}

func (s step) String() string {
	name := string(s.kind)
	if s.kind == Rebalance {
		name += map[bool]string{false: " 1→3", true: " 3→1"}[s.down]
	}
	return fmt.Sprintf("%s@%.0f%%", name, s.at*100)
}

// schedule derives the run's faults from seed: the growth to three
// consumers first, the shrink back to one last, and the others (kinds
// that apply, consumer kills twice) shuffled and spread over the middle,
// each point jittered.
func schedule(seed uint64, kinds []Kind) []step {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var mid []Kind
	for _, k := range kinds {
		switch k {
		case Rebalance:
		case ConsumerKill:
			mid = append(mid, k, k)
		default:
			mid = append(mid, k)
		}
	}
	rng.Shuffle(len(mid), func(i, j int) { mid[i], mid[j] = mid[j], mid[i] })
	plan := []step{{kind: Rebalance, at: 0.02 + 0.03*rng.Float64()}}
	width := 0.75 / float64(len(mid)+1)
	for i, k := range mid {
		plan = append(plan, step{kind: k, at: 0.08 + width*(float64(i)+0.5+0.4*(rng.Float64()-0.5))})
	}
	return append(plan, step{kind: Rebalance, at: 0.85 + 0.05*rng.Float64(), down: true})
}

// Report is the outcome of a run.
type Report struct {
	Name string
	// Store names the store's server, its version and package
	// ("PostgreSQL 16.4 (idem/postgres)", "MariaDB 10.11.6-MariaDB
	// (idem/mysql)").
	Store    string
	Seed     uint64
	Messages int
	Duration time.Duration
	// Plan lists the scheduled faults in order.
	Plan []string
	// Fired counts the faults seen to fire, by kind; NotFired lists
	// scheduled faults that were not (each fails the run), with why.
	Fired    map[Kind]int
	NotFired []string
	// NotApplicable names kinds the target cannot do, with the reason.
	NotApplicable map[Kind]string
	// History is the checker's report: lost, unexpected, duplicate
	// deliveries (allowed) and duplicate effects.
	History conformance.Report
	// Deliveries counts every delivery; Redeliveries those beyond the
	// first of each message.
	Deliveries, Redeliveries int
	// Published counts the relays' publishes (republished rows included).
	Published int
	// OrderViolations lists aggregates whose effects were not committed in
	// version order.
	OrderViolations []string
	// ConsumersActive counts the consumers (of all started) that handled
	// messages.
	ConsumersActive int
	// Early, EarlyApplied, Gaps and GapRetries add up the consumers'
	// idem.Stats (Early, EarlyApplied, Gaps, Retried); HoldsGaps says that
	// their inboxes hold gaps in the store (idem.GapsAuto on a
	// subscription without order per aggregate).
	Early, EarlyApplied, Gaps, GapRetries int64
	HoldsGaps                             bool
	// DeliveryLimit says how the subscription limits deliveries (or why
	// it does not); DeadLettered counts the messages in its dead-letter
	// queue at the end (-1: not counted, DeliveryLimit says why).
	DeliveryLimit string
	DeadLettered  int
	// WorkerRestarts counts workers that ended without being killed or
	// stopped (a driver gave up after a fault) and were started again.
	WorkerRestarts int
	// Failures explains a failed run (missing faults, bad history, time).
	Failures []string
}

// OK reports whether the run passed.
func (r *Report) OK() bool {
	return len(r.Failures) == 0 && len(r.NotFired) == 0 && r.History.Valid() && len(r.OrderViolations) == 0
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s: seed %d, %d messages in %s\n", r.Name, r.Seed, r.Messages, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "  store: %s\n", r.Store)
	fmt.Fprintf(&b, "  plan: %s\n", strings.Join(r.Plan, ", "))
	kinds := make([]string, 0, len(r.Fired))
	for k, n := range r.Fired {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(kinds)
	fmt.Fprintf(&b, "  faults fired: %s\n", strings.Join(kinds, " "))
	na := make([]string, 0, len(r.NotApplicable))
	for k, why := range r.NotApplicable {
		na = append(na, fmt.Sprintf("%s (%s)", k, why))
	}
	slices.Sort(na)
	if len(na) > 0 {
		fmt.Fprintf(&b, "  not applicable: %s\n", strings.Join(na, "; "))
	}
	h := r.History
	perMessage := 0.0
	if r.Published > 0 {
		perMessage = float64(r.Deliveries) / float64(r.Published)
	}
	fmt.Fprintf(&b, "  deliveries per message %.3f, rate %.0f messages/s\n", perMessage, float64(r.Published)/max(r.Duration.Seconds(), 1e-9))
	fmt.Fprintf(&b, "  published %d, deliveries %d (%d redeliveries, %d messages delivered more than once), duplicated effects %d, lost %d, unexpected %d, order violations %d, consumers that handled messages %d, worker restarts %d\n",
		r.Published, r.Deliveries, r.Redeliveries, len(h.DuplicateDeliveries), len(h.DuplicateEffects), len(h.Lost), len(h.Unexpected), len(r.OrderViolations), r.ConsumersActive, r.WorkerRestarts)
	fmt.Fprintf(&b, "  history: %s\n", h)
	gaps := "retried through the broker"
	if r.HoldsGaps {
		gaps = "held in the store"
	}
	fmt.Fprintf(&b, "  gaps %d (%s): early %d, early applied %d, gap retries %d\n", r.Gaps, gaps, r.Early, r.EarlyApplied, r.GapRetries)
	dead := "not counted"
	if r.DeadLettered >= 0 {
		dead = strconv.Itoa(r.DeadLettered)
	}
	fmt.Fprintf(&b, "  delivery limit: %s; dead-lettered %s\n", r.DeliveryLimit, dead)
	for _, s := range r.NotFired {
		fmt.Fprintf(&b, "  NOT FIRED: %s\n", s)
	}
	for _, s := range r.OrderViolations {
		fmt.Fprintf(&b, "  ORDER: %s\n", s)
	}
	for _, s := range r.Failures {
		fmt.Fprintf(&b, "  FAILURE: %s\n", s)
	}
	fmt.Fprintf(&b, "  result: %s", map[bool]string{true: "OK", false: "FAILED"}[r.OK()])
	return b.String()
}
