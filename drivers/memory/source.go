package memory

import (
	"fmt"
	"strconv"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// urlSetting is a URL parameter that states a topic's setting.
type urlSetting struct {
	param   string
	setting capability.Setting
	value   func(TopicConfig) string // of a normalized configuration
}

func durationOrNone(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return d.String()
}

func intOrNone(n int) string {
	if n <= 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

var urlSettings = []urlSetting{
	{"lock", capability.SettingLockTimeout, func(c TopicConfig) string { return durationOrNone(c.LockTimeout) }},
	{"dedup", capability.SettingDedupWindow, func(c TopicConfig) string { return durationOrNone(c.DedupWindow) }},
	{"retention", capability.SettingRedeliveryHorizon, func(c TopicConfig) string { return durationOrNone(c.MessageRetention) }},
	{"limit", capability.SettingDeliveryLimit, func(c TopicConfig) string { return intOrNone(c.DeliveryLimit) }},
	{"partitions", capability.SettingOrdering, func(c TopicConfig) string { return intOrNone(c.Partitions) + " partition(s)" }},
	{"maxsize", capability.SettingMaxMessageSize, func(c TopicConfig) string { return intOrNone(c.MaxMessageSize) + " bytes" }},
}

// urlConflicts are the settings that the parameters given (their names)
// of a URL state, as cfg, otherwise than existing topic t holds: the URL
// does not change an existing topic. cfg is normalized with t's profile
// when the URL names none.
func urlConflicts(t *topic, given map[string]bool, cfg TopicConfig, explicitProfile bool) []capability.Conflict {
	if !explicitProfile {
		cfg.Profile = t.cfg.Profile
	}
	n, err := cfg.normalize()
	if err != nil {
		return nil
	}
	var cs []capability.Conflict
	for _, s := range urlSettings {
		if !given[s.param] {
			continue
		}
		stated, held := s.value(n), s.value(t.cfg)
		if stated == held {
			continue
		}
		cs = append(cs, capability.Conflict{
			Setting: s.setting,
			Stated:  fmt.Sprintf("%s (%s in the URL)", stated, s.param),
			Held:    fmt.Sprintf("%s (topic %s's configuration)", held, t.name),
			Fix: fmt.Sprintf("drop %s from the URL, or state the topic's value: the URL configures a topic only when it creates it, and topic %s exists",
				s.param, t.name),
		})
	}
	return cs
}

// missingSource is the source of a side whose topic or subscription did
// not exist when it was opened: its capabilities are the defaults'.
func missingSource(what string, settings ...capability.Setting) capability.Source {
	var src capability.Source
	for _, s := range settings {
		src.Unread = append(src.Unread, capability.Unread{Setting: s,
			Why: what + " does not exist in the embedded broker: the capabilities are the default configuration's",
			Fix: "create it before opening (Broker.CreateTopic, Broker.CreateSubscription, or a mem:// URL that creates it)"})
	}
	return src
}
