package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/conformance"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/drivers/servicebus"
	"github.com/wary-go/wary/redact"
)

// entityReading is what probe read, read-only, of the entity the URL
// names: the capabilities its driver states for it (what it read from the
// broker, what it could not, the conflicts). Nothing is published to or
// received from that entity.
type entityReading struct {
	Name string `json:"name"`
	// Read: the entity was opened and its settings read; the scratch
	// entities then copy them where the harness can.
	Read bool `json:"read"`
	// Why nothing was read, when Read is false.
	Why          string             `json:"why,omitempty"`
	Settings     string             `json:"settings,omitempty"`
	Source       *capability.Source `json:"source,omitempty"`
	TopicRead    string             `json:"topic_settings,omitempty"`
	TopicSource  *capability.Source `json:"topic_source,omitempty"`
	TopicNotRead string             `json:"topic_not_read,omitempty"`

	sub *capability.Subscription
	top *capability.Topic
}

// probeOnly are the URL parameters that only probe's harness reads, by
// scheme: they are left out when the entity itself is opened.
var probeOnly = map[string][]string{
	"servicebus": {"topic"},
}

// readEntity opens the subscription (and, where it can, the topic) the
// probe URL names, the normal way, reads their capabilities and closes
// them, without receiving or publishing anything. Kafka's is not opened:
// a consumer group's consumer joins the group.
func (a *app) readEntity(ctx context.Context, raw string) entityReading {
	u, err := url.Parse(raw)
	if err != nil {
		return entityReading{Name: redact.String(raw), Why: "not a URL"}
	}
	e := entityReading{Name: u.Host + u.Path}
	if u.Opaque != "" {
		e.Name = u.Opaque
	}
	if u.Scheme == "kafka" {
		e.Why = "probe does not open a Kafka consumer group of yours: its consumer would join the group and move its partitions"
		return e
	}
	q := u.Query()
	for _, p := range probeOnly[u.Scheme] {
		q.Del(p)
	}
	subU, topU := *u, *u
	subU.RawQuery, topU.RawQuery = q.Encode(), q.Encode()
	if u.Scheme == memory.Scheme {
		// A memory topic lives in the process that opened it: the URL's
		// parameters (and the driver's defaults) are its settings.
		topU.Path = ""
		if strings.Trim(u.Path, "/") == "" {
			subU.Path = "/sub"
		}
	}
	openSub, openTop := a.openSubscription, a.openTopic
	var mux *broker.URLMux
	switch u.Scheme {
	case servicebus.Scheme:
		// The probe's environment (and --servicebus-admin-endpoint), as
		// its harness has it.
		mux = new(broker.URLMux)
		o := &servicebus.URLOpener{ConnectionString: a.io.Getenv(EnvServiceBus), AdminEndpoint: a.io.Getenv(EnvServiceBusAdmin)}
		mux.RegisterSubscription(servicebus.Scheme, o)
		mux.RegisterTopic(servicebus.Scheme, o)
	case memory.Scheme:
		// On a broker of its own, as a process of the user's would open
		// it: with the URL's settings and the driver's defaults.
		b := memory.New(nil)
		defer b.Close()
		mux = new(broker.URLMux)
		o := &memory.URLOpener{Broker: b}
		mux.RegisterSubscription(memory.Scheme, o)
		mux.RegisterTopic(memory.Scheme, o)
	}
	if mux != nil {
		openSub = func(ctx context.Context, raw string) (*broker.Subscription, error) {
			s, err := mux.OpenSubscription(ctx, raw)
			if err != nil {
				return nil, fmt.Errorf("open subscription %s: %w", redact.String(raw), err)
			}
			return s, nil
		}
		openTop = func(ctx context.Context, raw string) (*broker.Topic, error) {
			t, err := mux.OpenTopic(ctx, raw)
			if err != nil {
				return nil, fmt.Errorf("open topic %s: %w", redact.String(raw), err)
			}
			return t, nil
		}
	}
	sub, err := openSub(ctx, subU.String())
	if err != nil {
		e.Why = err.Error()
		return e
	}
	sc := sub.Capabilities()
	_ = sub.Close()
	e.Read, e.sub, e.Settings = true, &sc, sc.String()
	if len(sc.Source.Read) > 0 || len(sc.Source.Unread) > 0 || len(sc.Source.Conflicts) > 0 {
		e.Source = &sc.Source
	}
	top, err := openTop(ctx, topU.String())
	if err != nil {
		e.TopicNotRead = err.Error()
		return e
	}
	tc := top.Capabilities()
	_ = top.Close()
	e.top, e.TopicRead = &tc, tc.String()
	if len(tc.Source.Read) > 0 || len(tc.Source.Unread) > 0 || len(tc.Source.Conflicts) > 0 {
		e.TopicSource = &tc.Source
	}
	return e
}

// harnessURL adds to the probe URL the settings of the user's entity that
// a harness takes as URL parameters (a session queue on Service Bus),
// where the URL does not state them.
func harnessURL(raw string, e entityReading) string {
	u, err := url.Parse(raw)
	if err != nil || e.sub == nil {
		return raw
	}
	q := u.Query()
	if u.Scheme == servicebus.Scheme && !q.Has("sessions") && e.sub.Ordering == capability.OrderSession {
		q.Set("sessions", "true")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// The probe's own settings, which conformance asks of a fixture.
const (
	ownLock  = 2 * time.Second
	ownDedup = 3 * time.Second
)

// copySettings makes h's fixtures ask for the user's delivery limit, lock
// timeout and dedup window instead of the probe's own. Where h waits in
// real time (a live broker), a longer lock or window is shortened to the
// probe's own, to keep the run short; shortened says which.
func copySettings(h *conformance.Harness, e entityReading) (shortened map[capability.Setting]string) {
	if e.sub == nil {
		return nil
	}
	realTime := h.Wait == nil
	shortened = map[capability.Setting]string{}
	lock, limit := e.sub.LockTimeout, e.sub.DeliveryLimit
	if realTime && lock > ownLock {
		shortened[capability.SettingLockTimeout] = "shortened to keep the run short"
		lock = ownLock
	}
	dedup, dedupSet := time.Duration(0), e.top != nil
	if dedupSet {
		dedup = e.top.DedupWindow
		if realTime && dedup > ownDedup {
			shortened[capability.SettingDedupWindow] = "shortened to keep the run short"
			dedup = ownDedup
		}
	}
	setup := h.Setup
	h.Setup = func(ctx context.Context, t conformance.T, cfg conformance.Config) (*conformance.Fixture, error) {
		if limit > 0 {
			cfg.DeliveryLimit = limit
		}
		if lock > 0 {
			cfg.LockTimeout = lock
		}
		if dedupSet {
			cfg.DedupWindow = dedup
		}
		return setup(ctx, t, cfg)
	}
	return shortened
}

// scratchReport says with which settings the scratch entities were made:
// the user's, copied (Copied), or not (NotCopied, with why).
type scratchReport struct {
	// Own: the user's entity was not read; the probe's own settings.
	Own          bool        `json:"own_settings"`
	Capabilities string      `json:"capabilities"`
	Read         string      `json:"read,omitempty"`
	Copied       []string    `json:"copied,omitempty"`
	NotCopied    []notCopied `json:"not_copied,omitempty"`
}

type notCopied struct {
	Setting capability.Setting `json:"setting"`
	Yours   string             `json:"yours"`
	Scratch string             `json:"scratch"`
	Why     string             `json:"why"`
}

// whyNot explains, per scheme, a setting its harness cannot copy.
var whyNot = map[string]map[capability.Setting]string{
	"sqsfifo": {
		capability.SettingLockTimeout:       "the scratch queue's visibility timeout is at least 3s, so that head-of-line can hold a delivery through two quiet periods",
		capability.SettingDedupWindow:       "the server's deduplication window is fixed (AWS: 5 minutes); dedup_window= states it",
		capability.SettingRedeliveryHorizon: "the scratch queues keep messages for the probe's own retention, which redelivery-horizon checks",
	},
	"servicebus": {
		capability.SettingLockTimeout:       "the scratch entity's lock duration is at least 5s, the service's minimum",
		capability.SettingRedeliveryHorizon: "the scratch entities have no message TTL",
	},
	"rabbit": {
		capability.SettingDeadLetter:        "the scratch queue always has a dead-letter queue, which the delivery-limit scenarios read",
		capability.SettingRedeliveryHorizon: "the scratch queue is a quorum queue that keeps messages until settled",
	},
	"kafka": {
		capability.SettingRedeliveryHorizon: "the scratch topic keeps records forever (retention.ms=-1)",
	},
	"nats": {
		capability.SettingLockTimeout:       "the scratch consumer's ack_wait is at least 3s (5s with max_ack_pending=1), so that head-of-line can hold a delivery through two quiet periods",
		capability.SettingDeadLetter:        "the scratch consumer always has a dead-letter stream, which the delivery-limit scenarios read",
		capability.SettingRedeliveryHorizon: "the scratch streams keep messages for the probe's own max_age, which redelivery-horizon checks",
	},
}

// compareScratch compares what the scratch entities declare (caps) with
// the user's entity.
func compareScratch(scheme string, e entityReading, caps conformance.Capabilities, shortened map[capability.Setting]string) scratchReport {
	r := scratchReport{Own: e.sub == nil, Capabilities: caps.String(), Read: caps.Subscription.Source.Read}
	if r.Own {
		return r
	}
	if scheme == "amqp" || scheme == "amqps" {
		scheme = "rabbit"
	}
	cmp := func(s capability.Setting, yours, scratch string) {
		if yours == scratch {
			r.Copied = append(r.Copied, fmt.Sprintf("%s %s", s, yours))
			return
		}
		why := shortened[s]
		if why == "" {
			why = whyNot[scheme][s]
		}
		if why == "" {
			why = "the probe's harness for " + scheme + ":// does not set it"
		}
		r.NotCopied = append(r.NotCopied, notCopied{Setting: s, Yours: yours, Scratch: scratch, Why: why})
	}
	u, s := e.sub, caps.Subscription
	limit := func(c capability.Subscription) string {
		if c.DeliveryLimit <= 0 {
			return "none"
		}
		return fmt.Sprintf("%d (%s)", c.DeliveryLimit, c.DeliveryLimitMode)
	}
	if u.DeliveryLimit <= 0 && s.DeliveryLimit > 0 {
		r.NotCopied = append(r.NotCopied, notCopied{Setting: capability.SettingDeliveryLimit, Yours: "none", Scratch: limit(s),
			Why: "the scratch entities have a limit of the probe's own, so that delivery-limit-dead-letters can measure one"})
	} else {
		cmp(capability.SettingDeliveryLimit, limit(*u), limit(s))
	}
	cmp(capability.SettingDeadLetter, yesNo(u.DeadLetter), yesNo(s.DeadLetter))
	cmp(capability.SettingLockTimeout, lockText(*u, u.LockTimeout.String()), lockText(s, s.LockTimeout.String()))
	order := func(c capability.Subscription) string {
		if c.HeadOfLine {
			return c.Ordering.String() + ", head-of-line"
		}
		return c.Ordering.String()
	}
	cmp(capability.SettingOrdering, order(*u), order(s))
	cmp(capability.SettingRedeliveryHorizon, capability.HorizonString(u.RedeliveryHorizon), capability.HorizonString(s.RedeliveryHorizon))
	if e.top != nil {
		dedup := func(c capability.Topic) string {
			if c.DedupWindow <= 0 {
				return "none"
			}
			return fmt.Sprintf("%s per %s", c.DedupWindow, c.DedupScope)
		}
		cmp(capability.SettingDedupWindow, dedup(*e.top), dedup(caps.Topic))
	}
	return r
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
