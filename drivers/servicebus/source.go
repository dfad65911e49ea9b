package servicebus

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/redact"
)

// via says how a side's entity properties were given, for its Source: by
// a servicebus:// URL (whose parameters stated says are present) or by
// options, and where the administration client goes.
type via struct {
	url     bool
	stated  *driver.URLParams
	adminAt string // what names the administration endpoint ("": the namespace's own)
}

// setting is one entity property a side states, compared with the entity
// the administration client read, or taken as it is without one.
type setting struct {
	setting capability.Setting
	param   string // the URL parameter
	field   string // the Properties field
	name    string // the entity's property, as the administration API names it
	stated  bool   // the URL or options state it
	value   string // the stated value, rendered as a URL parameter's
	held    string // the value that applies, likewise: the entity's, or with nothing read the stated one or the default ("": unknown)
	prop    string // the entity's value, as the administration API gives it ("": held)
	differ  bool   // the entity holds another value than the stated one
}

func durationText(d time.Duration) string {
	switch d {
	case capability.HorizonUnbounded:
		return "unbounded"
	case 0:
		return ""
	}
	return d.String()
}

// subscriptionSettings are the consumer's side's settings of a queue or
// subscription (only the lock for its dead-letter queue: the rest of a
// dead-letter queue is Service Bus's, not a setting); declared is what the
// URL or options state, held what applies (both with defaults applied to
// held only).
func subscriptionSettings(v via, declared, held entityProps, dlq bool) []setting {
	has := func(param string, nonzero bool) bool {
		if v.url {
			return v.stated.Has(param) && nonzero
		}
		return nonzero
	}
	lock := setting{setting: capability.SettingLockTimeout, param: "lock_duration", field: "SubscriptionProperties.LockDuration", name: "LockDuration",
		stated: has("lock_duration", declared.LockDuration > 0), value: durationText(declared.LockDuration), held: durationText(held.LockDuration),
		differ: declared.LockDuration != held.LockDuration}
	if dlq {
		return []setting{lock}
	}
	sessions := v.url && v.stated.Has("sessions") || !v.url && declared.RequiresSession
	return []setting{
		{setting: capability.SettingDeliveryLimit, param: "max_delivery_count", field: "SubscriptionProperties.MaxDeliveryCount", name: "MaxDeliveryCount",
			stated: has("max_delivery_count", declared.MaxDeliveryCount > 0), value: strconv.Itoa(declared.MaxDeliveryCount), held: strconv.Itoa(held.MaxDeliveryCount),
			differ: declared.MaxDeliveryCount != held.MaxDeliveryCount},
		lock,
		{setting: capability.SettingRedeliveryHorizon, param: "ttl", field: "SubscriptionProperties.DefaultMessageTimeToLive", name: "DefaultMessageTimeToLive",
			stated: has("ttl", declared.DefaultMessageTimeToLive > 0), value: durationText(declared.DefaultMessageTimeToLive), held: durationText(held.DefaultMessageTimeToLive),
			differ: declared.DefaultMessageTimeToLive != held.DefaultMessageTimeToLive},
		{setting: capability.SettingOrdering, param: "sessions", field: "SubscriptionProperties.RequiresSession", name: "RequiresSession",
			stated: sessions, value: strconv.FormatBool(declared.RequiresSession), held: strconv.FormatBool(held.RequiresSession),
			differ: declared.RequiresSession != held.RequiresSession},
	}
}

// topicSettings are the publisher's side's settings of a queue or topic.
// Whether a topic's subscriptions require sessions is theirs, declared to
// the topic and read by each subscription: it is not one of the topic's.
func topicSettings(v via, declared, held entityProps, isQueue bool) []setting {
	stated := func(param string, nonzero bool) bool {
		if v.url {
			return v.stated.Has(param)
		}
		return nonzero
	}
	dedup := func(d time.Duration) string {
		if d <= 0 {
			return "off"
		}
		return d.String()
	}
	size := held.MaxMessageSize
	s := []setting{
		{setting: capability.SettingDedupWindow, param: "dedup_window", field: "TopicProperties.DuplicateDetectionWindow", name: "DuplicateDetectionHistoryTimeWindow",
			stated: stated("dedup_window", declared.DuplicateDetectionWindow > 0), value: declared.DuplicateDetectionWindow.String(), held: held.DuplicateDetectionWindow.String(),
			prop:   dedup(held.DuplicateDetectionWindow),
			differ: declared.DuplicateDetectionWindow != held.DuplicateDetectionWindow},
		{setting: capability.SettingMaxMessageSize, param: "max_message_size", field: "TopicProperties.MaxMessageSize", name: "MaxMessageSizeInKilobytes",
			stated: stated("max_message_size", declared.MaxMessageSize > 0) && declared.MaxMessageSize > 0, value: strconv.Itoa(declared.MaxMessageSize),
			held: strconv.Itoa(size), prop: strconv.Itoa(size>>10) + " (" + strconv.Itoa(size) + " bytes)", differ: declared.MaxMessageSize != size},
	}
	if isQueue {
		s = append(s, setting{setting: capability.SettingOrdering, param: "sessions", field: "TopicProperties.RequiresSession", name: "RequiresSession",
			stated: v.url && v.stated.Has("sessions") || !v.url && declared.RequiresSession, value: strconv.FormatBool(declared.RequiresSession),
			held: strconv.FormatBool(held.RequiresSession), differ: declared.RequiresSession != held.RequiresSession})
	}
	return s
}

// sourceOf says where a side's capabilities come from. read names what the
// administration client read ("" : nothing, so every setting is unread);
// settings are that side's.
func sourceOf(v via, read string, settings []setting, optionsType string) capability.Source {
	var src capability.Source
	if read != "" {
		src.Read = read + " through the administration API"
		for _, s := range settings {
			if !s.stated || !s.differ || s.held == "" {
				continue
			}
			prop := s.prop
			if prop == "" {
				prop = s.held
			}
			c := capability.Conflict{Setting: s.setting, Held: s.name + " " + prop}
			if v.url {
				c.Stated = s.param + "=" + s.value + " in the URL"
				c.Fix = fmt.Sprintf("drop %s from the URL, or set the entity's %s to %s", s.param, s.name, s.value)
			} else {
				c.Stated = s.field + " " + s.value
				c.Fix = fmt.Sprintf("drop %s, or set the entity's %s to %s", s.field, s.name, s.value)
			}
			src.Conflicts = append(src.Conflicts, c)
		}
		return src
	}
	for _, s := range settings {
		u := capability.Unread{Setting: s.setting}
		switch {
		case v.url && s.stated:
			u.Why = fmt.Sprintf("read_entity=false: taken from the URL (%s=%s)", s.param, s.value)
		case v.url && s.held == "":
			u.Why = fmt.Sprintf("read_entity=false: not in the URL either (%s)", s.param)
		case v.url:
			u.Why = fmt.Sprintf("read_entity=false: not in the URL either, so the default %s=%s is assumed", s.param, s.held)
		case s.stated:
			u.Why = fmt.Sprintf("no administration client: taken from %s (%s)", s.field, s.value)
		case s.held == "":
			u.Why = fmt.Sprintf("no administration client, and %s is not set either", s.field)
		default:
			u.Why = fmt.Sprintf("no administration client: %s not set either, so the default %s is assumed", s.field, s.held)
		}
		if v.url {
			u.Fix = "drop read_entity=false; for an emulator set " + EnvAdminEndpoint + " to its administration endpoint"
		} else {
			u.Fix = "set " + optionsType + ".Admin, an administration client of the namespace"
		}
		src.Unread = append(src.Unread, u)
	}
	return src
}

// EntityReadError says that the administration API did not answer a read
// of an entity's properties (the entity's absence is ErrNotFound, not
// this). It reaches users inside a *broker.Error (errors.As finds it),
// classified PermissionDenied for HTTP 401 and 403 and Unavailable
// otherwise. Its message says how to reach the API or to do without it,
// and never holds the connection string or its key.
type EntityReadError struct {
	// Entity is what was read, e.g. `queue "orders"`.
	Entity string
	// Endpoint names what set the administration endpoint (e.g.
	// WARY_SERVICEBUS_ADMIN_ENDPOINT), empty for the namespace's own.
	Endpoint string
	// Status is the HTTP status of the answer, 0 when none came.
	Status int
	Err    error
}

func (e *EntityReadError) Error() string {
	cause := redact.String(e.Err.Error())
	if e.Status != 0 {
		cause = "HTTP " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	}
	msg := fmt.Sprintf("servicebus: reading %s through the administration API: %s; ", e.Entity, cause)
	without := "or open it without reading the entity (read_entity=false in the URL, no Admin in the options), whose settings wary explain then reports as unknown"
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return msg + "the administration API needs a key with the Manage right: use one in the connection string, " + without
	case e.Endpoint != "":
		return msg + "check the administration endpoint that " + e.Endpoint + " names (an emulator's, e.g. http://127.0.0.1:5300), " + without
	}
	return msg + "it was asked at the namespace's own https endpoint; an emulator serves it elsewhere: set " + EnvAdminEndpoint +
		" to its administration endpoint (e.g. http://127.0.0.1:5300), " + without
}

func (e *EntityReadError) Unwrap() error { return e.Err }

// readError wraps a failed read of an entity through the administration
// API.
func readError(kind, name string, err error) error {
	e := &EntityReadError{Entity: kind + " " + strconv.Quote(name), Err: err}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		e.Status = re.StatusCode
	}
	return e
}

// openReadError classifies a failed read of the entity for the open,
// naming what set the administration endpoint.
func openReadError(err error, adminAt string) error {
	var re *EntityReadError
	if !errors.As(err, &re) {
		return driver.OpenError(code(err), err)
	}
	re.Endpoint = adminAt
	c := code(re.Err)
	switch {
	case re.Status == http.StatusUnauthorized || re.Status == http.StatusForbidden:
		c = driver.PermissionDenied
	case c == driver.Unknown:
		c = driver.Unavailable
	}
	return driver.OpenError(c, err)
}
