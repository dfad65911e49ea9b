package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

// Spec is a topology Declare creates: a stream capturing Subject and
// Subject.>, and, with a Consumer, its durable pull consumer and the
// dead-letter stream. Zero fields take JetStream's defaults, except those
// documented otherwise.
type Spec struct {
	Stream string
	// Subject defaults to the stream's name.
	Subject string
	// Consumer, if not empty, is the durable pull consumer (ack_policy
	// explicit) to create.
	Consumer string
	// DeadLetterStream defaults to DeadLetterStream(Stream); it captures
	// DeadLetterSubject(Stream, "*"). Created with a Consumer.
	DeadLetterStream string
	// AckWait is the consumer's (default 30s).
	AckWait time.Duration
	// MaxDeliver is the consumer's: the delivery limit is one less (the
	// last delivery is the driver's, which dead-letters it). -1: no limit.
	// Default 5 (a delivery limit of 4).
	MaxDeliver int
	// MaxAckPending is the consumer's: 1 delivers the whole consumer in
	// order, one message at a time (OrderQueue, head-of-line). Default
	// 1000.
	MaxAckPending int
	// DuplicateWindow is the stream's duplicate_window (default 2m).
	DuplicateWindow time.Duration
	// MaxAge is the stream's max_age and the dead-letter stream's (0:
	// kept until removed).
	MaxAge time.Duration
}

func (s Spec) withDefaults() Spec {
	if s.Subject == "" {
		s.Subject = s.Stream
	}
	if s.DeadLetterStream == "" {
		s.DeadLetterStream = DeadLetterStream(s.Stream)
	}
	if s.AckWait == 0 {
		s.AckWait = 30 * time.Second
	}
	if s.MaxDeliver == 0 {
		s.MaxDeliver = 5
	}
	if s.MaxAckPending == 0 {
		s.MaxAckPending = 1000
	}
	return s
}

func (s Spec) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: s.Stream, Subjects: []string{s.Subject, s.Subject + ".>"}, Duplicates: s.DuplicateWindow, MaxAge: s.MaxAge, Storage: jetstream.FileStorage}
}

func (s Spec) deadLetterConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: s.DeadLetterStream, Subjects: []string{DeadLetterSubject(s.Stream, "*")}, MaxAge: s.MaxAge, Storage: jetstream.FileStorage}
}

func (s Spec) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: s.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.AckWait, MaxDeliver: s.MaxDeliver, MaxAckPending: s.MaxAckPending}
}

func (s Spec) check() error {
	if err := validName("stream", s.Stream); err != nil {
		return err
	}
	if err := validSubject(s.Subject); err != nil {
		return err
	}
	if s.Consumer != "" {
		if err := validName("consumer", s.Consumer); err != nil {
			return err
		}
		if err := validName("dead-letter stream", s.DeadLetterStream); err != nil {
			return err
		}
	}
	return nil
}

// Declare creates what spec names and does not exist; it changes nothing
// that exists. Errors match the classes of package broker.
func Declare(ctx context.Context, js jetstream.JetStream, spec Spec) error {
	spec = spec.withDefaults()
	if err := spec.check(); err != nil {
		return err
	}
	create := func(cfg jetstream.StreamConfig) error {
		if _, err := js.Stream(ctx, cfg.Name); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return driver.OpenError(classify(err).Code, fmt.Errorf("nats: stream %q: %w", cfg.Name, err))
		}
		if _, err := js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return driver.OpenError(classify(err).Code, fmt.Errorf("nats: create stream %q: %w", cfg.Name, err))
		}
		return nil
	}
	if err := create(spec.streamConfig()); err != nil {
		return err
	}
	if spec.Consumer == "" {
		return nil
	}
	if err := create(spec.deadLetterConfig()); err != nil {
		return err
	}
	if _, err := js.Consumer(ctx, spec.Stream, spec.Consumer); err == nil {
		return nil
	}
	if _, err := js.CreateConsumer(ctx, spec.Stream, spec.consumerConfig()); err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return driver.OpenError(classify(err).Code, fmt.Errorf("nats: create consumer %q: %w", spec.Consumer, err))
	}
	return nil
}

// plan lists the entities of spec as they stand on the server.
func plan(ctx context.Context, js jetstream.JetStream, spec Spec) ([]topology.Entity, error) {
	stated := spec
	spec = spec.withDefaults()
	if err := spec.check(); err != nil {
		return nil, err
	}
	sc := spec.streamConfig()
	ents := []topology.Entity{{Kind: "stream", Name: spec.Stream, Settings: []string{
		"subjects " + sc.Subjects[0] + ", " + sc.Subjects[1],
		"duplicate_window " + durOr(spec.DuplicateWindow, "2m0s (the server's default)"),
		"max_age " + durOr(spec.MaxAge, "unlimited"),
	}}}
	lookStream := func(e *topology.Entity, name string, check func(jetstream.StreamConfig)) error {
		st, err := js.Stream(ctx, name)
		switch {
		case err == nil:
			e.Exists = true
			if check != nil {
				check(st.CachedInfo().Config)
			}
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return driver.OpenError(classify(err).Code, fmt.Errorf("nats: stream %q: %w", name, err))
		}
		return nil
	}
	conflict := func(e *topology.Entity, s capability.Setting, statedV, held string) {
		e.Conflicts = append(e.Conflicts, capability.Conflict{Setting: s, Stated: statedV, Held: held})
	}
	if err := lookStream(&ents[0], spec.Stream, func(c jetstream.StreamConfig) {
		if !captures(c, spec.Subject) && !captures(c, spec.Subject+".k") {
			conflict(&ents[0], capability.SettingKind, "captures "+spec.Subject+" and "+spec.Subject+".>", fmt.Sprintf("subjects %v", streamSubjects(c)))
		}
		if stated.DuplicateWindow > 0 && c.Duplicates != stated.DuplicateWindow {
			conflict(&ents[0], capability.SettingDedupWindow, "duplicate_window="+stated.DuplicateWindow.String()+" in the URL", "duplicate_window "+c.Duplicates.String())
		}
		if stated.MaxAge > 0 && c.MaxAge != stated.MaxAge {
			conflict(&ents[0], capability.SettingRedeliveryHorizon, "max_age="+stated.MaxAge.String()+" in the URL", "max_age "+c.MaxAge.String())
		}
	}); err != nil {
		return nil, err
	}
	if spec.Consumer == "" {
		return ents, nil
	}
	dlq := topology.Entity{Kind: "dead-letter stream", Name: spec.DeadLetterStream, Settings: []string{"subjects " + DeadLetterSubject(spec.Stream, "*")}}
	if err := lookStream(&dlq, spec.DeadLetterStream, nil); err != nil {
		return nil, err
	}
	ce := topology.Entity{Kind: "durable pull consumer", Name: spec.Stream + "/" + spec.Consumer, Settings: []string{
		"ack_policy explicit", "ack_wait " + spec.AckWait.String(), fmt.Sprintf("max_deliver %d", spec.MaxDeliver), fmt.Sprintf("max_ack_pending %d", spec.MaxAckPending)}}
	if ents[0].Exists {
		c, err := js.Consumer(ctx, spec.Stream, spec.Consumer)
		switch {
		case err == nil:
			ce.Exists = true
			cc := c.CachedInfo().Config
			if stated.AckWait > 0 && cc.AckWait != stated.AckWait {
				conflict(&ce, capability.SettingLockTimeout, "ack_wait="+stated.AckWait.String()+" in the URL", "ack_wait "+cc.AckWait.String())
			}
			if stated.MaxDeliver != 0 && cc.MaxDeliver != stated.MaxDeliver {
				conflict(&ce, capability.SettingDeliveryLimit, fmt.Sprintf("max_deliver=%d in the URL", stated.MaxDeliver), fmt.Sprintf("max_deliver %d", cc.MaxDeliver))
			}
			if stated.MaxAckPending != 0 && cc.MaxAckPending != stated.MaxAckPending {
				conflict(&ce, capability.SettingOrdering, fmt.Sprintf("max_ack_pending=%d in the URL", stated.MaxAckPending), fmt.Sprintf("max_ack_pending %d", cc.MaxAckPending))
			}
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			return nil, driver.OpenError(classify(err).Code, fmt.Errorf("nats: consumer %q: %w", spec.Consumer, err))
		}
	}
	return append(ents, dlq, ce), nil
}

func durOr(d time.Duration, def string) string {
	if d <= 0 {
		return def
	}
	return d.String()
}
