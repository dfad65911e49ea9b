package driver

import "slices"

// Setting names a broker setting that a field of the capabilities stands
// for, in a Source.
type Setting string

// The settings a Source speaks of.
const (
	// SettingDeliveryLimit: DeliveryLimit and DeliveryLimitMode (RabbitMQ's
	// x-delivery-limit or delivery-limit policy, SQS's redrive
	// maxReceiveCount, Service Bus's MaxDeliveryCount).
	SettingDeliveryLimit Setting = "delivery limit"
	// SettingDeadLetter: DeadLetter (a dead-letter exchange, a redrive
	// target, a dead-letter topic).
	SettingDeadLetter Setting = "dead-letter target"
	// SettingOrdering: Ordering and HeadOfLine (a single active consumer,
	// sessions, a FIFO queue).
	SettingOrdering Setting = "ordering"
	// SettingLockTimeout: LockTimeout (a visibility timeout, a lock
	// duration).
	SettingLockTimeout Setting = "lock timeout"
	// SettingRedeliveryHorizon: RedeliveryHorizon (a retention period, a
	// time to live).
	SettingRedeliveryHorizon Setting = "redelivery horizon"
	// SettingDedupWindow: DedupWindow and DedupScope.
	SettingDedupWindow Setting = "dedup window"
	// SettingMaxMessageSize: MaxMessageSize.
	SettingMaxMessageSize Setting = "max message size"
	// SettingQueueLength: a bound on the queue's length and what happens
	// past it (RabbitMQ's x-max-length and x-overflow), which the
	// capabilities have no field for: a queue that drops or dead-letters
	// its oldest messages when full loses or diverts messages no handler
	// saw.
	SettingQueueLength Setting = "queue length"
	// SettingKind: what an entity is, in the broker's words (a RabbitMQ
	// queue's type, an exchange's type), which decides what the others
	// can mean.
	SettingKind Setting = "kind"
)

// Source says where a side's capabilities come from: what the driver read
// from the live broker, which settings it could not read, and where the
// URL or options state other values than the broker holds. A driver that
// reads nothing leaves Read empty and lists, in Unread, the settings its
// fields merely repeat from the URL or options.
type Source struct {
	// Read says, for people, what the driver read from the broker and
	// through which interface, e.g. "quorum queue shop.billing and its
	// policy, through the management API". Empty: nothing was read.
	Read string `json:"read,omitempty"`
	// Unread are the settings the driver could not read from the broker.
	// Their fields hold what the URL or options stated, or the driver's
	// default, which a statement does not present as the broker's.
	Unread []Unread `json:"unread,omitempty"`
	// Conflicts are the settings for which the URL or options state a
	// value other than the one the broker holds. The fields hold the
	// broker's value: it is the one that applies.
	Conflicts []Conflict `json:"conflicts,omitempty"`
}

// Unread is a setting a driver could not read from the broker.
type Unread struct {
	Setting Setting `json:"setting"`
	// Why it could not be read, and Fix, how to make it readable. Neither
	// holds a secret.
	Why string `json:"why"`
	Fix string `json:"fix"`
}

// Conflict is a setting whose value the URL or options state otherwise
// than the broker holds.
type Conflict struct {
	Setting Setting `json:"setting"`
	// Stated is the URL's or options' value, Held the broker's, both for
	// people (e.g. "delivery_limit=5 in the URL", "20 deliveries
	// (x-delivery-limit 19)").
	Stated string `json:"stated"`
	Held   string `json:"held"`
	// Fix says how to make them agree.
	Fix string `json:"fix"`
}

// IsUnread reports whether s could not be read from the broker.
func (src Source) IsUnread(s Setting) bool {
	return slices.ContainsFunc(src.Unread, func(u Unread) bool { return u.Setting == s })
}
