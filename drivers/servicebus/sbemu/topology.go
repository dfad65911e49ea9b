package sbemu

import (
	"encoding/json"
	"time"
)

// Topology describes the entities the emulator serves. Durations left zero
// take the service's defaults (lock 60s, MaxDeliveryCount 10, no expiry, no
// duplicate detection).
type Topology struct {
	Queues []Queue
	Topics []Topic
	// MaxMessageSize is the largest message accepted, in bytes (default
	// 262144, the Standard tier's limit).
	MaxMessageSize int
	// OutgoingWindow is how many deliveries the emulator keeps in flight per
	// AMQP session (default 65536). Tests lower it to prove that settled
	// deliveries free their slot.
	OutgoingWindow int
}

// Queue is a queue and, implicitly, its dead-letter queue
// (<name>/$DeadLetterQueue).
type Queue struct {
	Name                             string
	RequiresSession                  bool
	LockDuration                     time.Duration
	MaxDeliveryCount                 int32
	DefaultMessageTimeToLive         time.Duration
	DeadLetteringOnMessageExpiration bool
	DuplicateDetectionWindow         time.Duration
}

// Topic fans every message out to each of its subscriptions
// (<topic>/Subscriptions/<name>), each with its own dead-letter queue.
type Topic struct {
	Name                     string
	DuplicateDetectionWindow time.Duration
	Subscriptions            []Subscription
}

// Subscription of a topic.
type Subscription struct {
	Name                             string
	RequiresSession                  bool
	LockDuration                     time.Duration
	MaxDeliveryCount                 int32
	DefaultMessageTimeToLive         time.Duration
	DeadLetteringOnMessageExpiration bool
}

type jsonEntity struct {
	Name                                  string       `json:"name"`
	RequiresSession                       bool         `json:"requiresSession,omitempty"`
	LockDurationMs                        int64        `json:"lockDurationMs,omitempty"`
	MaxDeliveryCount                      int32        `json:"maxDeliveryCount,omitempty"`
	DefaultMessageTimeToLiveMs            int64        `json:"defaultMessageTimeToLiveMs,omitempty"`
	DeadLetteringOnMessageExpiration      bool         `json:"deadLetteringOnMessageExpiration,omitempty"`
	DuplicateDetectionHistoryTimeWindowMs int64        `json:"duplicateDetectionHistoryTimeWindowMs,omitempty"`
	Subscriptions                         []jsonEntity `json:"subscriptions,omitempty"`
}

type jsonTopology struct {
	Queues              []jsonEntity `json:"queues"`
	Topics              []jsonEntity `json:"topics"`
	MaxMessageSizeBytes int          `json:"maxMessageSizeBytes,omitempty"`
	OutgoingWindow      int          `json:"outgoingWindow,omitempty"`
}

func millis(d time.Duration) int64 { return d.Milliseconds() }

// MarshalJSON writes the topology in the emulator's config format.
func (t Topology) MarshalJSON() ([]byte, error) {
	out := jsonTopology{Queues: []jsonEntity{}, Topics: []jsonEntity{}, MaxMessageSizeBytes: t.MaxMessageSize, OutgoingWindow: t.OutgoingWindow}
	for _, q := range t.Queues {
		out.Queues = append(out.Queues, jsonEntity{
			Name:                                  q.Name,
			RequiresSession:                       q.RequiresSession,
			LockDurationMs:                        millis(q.LockDuration),
			MaxDeliveryCount:                      q.MaxDeliveryCount,
			DefaultMessageTimeToLiveMs:            millis(q.DefaultMessageTimeToLive),
			DeadLetteringOnMessageExpiration:      q.DeadLetteringOnMessageExpiration,
			DuplicateDetectionHistoryTimeWindowMs: millis(q.DuplicateDetectionWindow),
		})
	}
	for _, tp := range t.Topics {
		je := jsonEntity{Name: tp.Name, DuplicateDetectionHistoryTimeWindowMs: millis(tp.DuplicateDetectionWindow)}
		for _, s := range tp.Subscriptions {
			je.Subscriptions = append(je.Subscriptions, jsonEntity{
				Name:                             s.Name,
				RequiresSession:                  s.RequiresSession,
				LockDurationMs:                   millis(s.LockDuration),
				MaxDeliveryCount:                 s.MaxDeliveryCount,
				DefaultMessageTimeToLiveMs:       millis(s.DefaultMessageTimeToLive),
				DeadLetteringOnMessageExpiration: s.DeadLetteringOnMessageExpiration,
			})
		}
		out.Topics = append(out.Topics, je)
	}
	return json.Marshal(out)
}
