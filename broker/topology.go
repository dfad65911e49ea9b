package broker

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/wary-go/wary/broker/driver"
)

// TopologyURLOpener plans the topology a URL describes: the exchanges,
// queues, topics and subscriptions that opening the URL needs, with the
// settings its parameters state. A driver's SubscriptionURLOpener (or,
// for a scheme with no subscriptions, its TopicURLOpener) implements it;
// URLMux.PlanTopology finds it there, as OpenDeadLetters finds a
// DeadLetterURLOpener.
//
// PlanTopologyURL reads the URL with the parameters its openers accept,
// looks up each entity on the broker and changes nothing. Its errors
// match the classes of this package as OpenSubscriptionURL's do; a URL
// that describes nothing the driver could declare is ErrInvalid.
type TopologyURLOpener interface {
	PlanTopologyURL(ctx context.Context, u *url.URL) (*Plan, error)
}

// Plan is the topology a URL describes, as it stands on the broker: each
// entity, whether it exists, and how an existing one differs from what the
// URL states. Apply declares what is missing.
type Plan struct {
	// Entities are in the order Apply declares them.
	Entities []Entity `json:"entities"`
	apply    func(ctx context.Context, missing []Entity) error
}

// Entity is one exchange, queue, topic or subscription of a Plan.
type Entity struct {
	// Kind says what it is, in the broker's words: "exchange", "quorum
	// queue", "FIFO queue", "dead-letter queue", "queue", "topic",
	// "subscription".
	Kind string `json:"kind"`
	// Name is the entity's name on the broker.
	Name string `json:"name"`
	// Settings are those it is declared with (or, existing, those the URL
	// states), for people: "x-delivery-limit 4", "MaxDeliveryCount 5".
	Settings []string `json:"settings,omitempty"`
	// Exists reports whether the broker has it now.
	Exists bool `json:"exists"`
	// Conflicts, for an existing entity, are the settings it holds
	// otherwise than Settings say, with Fix empty: Apply leaves the entity
	// as it is, and only its owner can change it, or the URL.
	Conflicts []driver.Conflict `json:"conflicts,omitempty"`
	// Unread says why an existing entity's settings could not be read
	// and compared ("": they were, or it does not exist).
	Unread string `json:"unread,omitempty"`
}

// NewPlan returns a Plan of entities, for drivers. apply declares the
// entities it is given (those of entities that do not exist, in their
// order); it must not change or delete an existing entity.
func NewPlan(entities []Entity, apply func(ctx context.Context, missing []Entity) error) *Plan {
	return &Plan{Entities: entities, apply: apply}
}

// Missing returns the entities that do not exist.
func (p *Plan) Missing() []Entity {
	var m []Entity
	for _, e := range p.Entities {
		if !e.Exists {
			m = append(m, e)
		}
	}
	return m
}

// Differs reports whether an existing entity holds settings other than
// the URL states.
func (p *Plan) Differs() bool {
	for _, e := range p.Entities {
		if len(e.Conflicts) > 0 {
			return true
		}
	}
	return false
}

// Apply declares the entities that did not exist when the plan was made,
// and marks them as existing. It changes and deletes nothing that exists
// (a difference stays one); an entity declared meanwhile by someone else
// with other settings is an error matching ErrInvalid on brokers that
// compare declarations (RabbitMQ), or left as it is. Its errors match the
// classes of this package, with Op "topology".
func (p *Plan) Apply(ctx context.Context) error {
	missing := p.Missing()
	if len(missing) == 0 {
		return nil
	}
	if p.apply == nil {
		return newError("topology", driver.Unknown, false, fmt.Errorf("the plan declares nothing: %w", ErrUnsupported))
	}
	if err := p.apply(ctx, missing); err != nil {
		return wrapErr("topology", func(error) driver.ErrorInfo { return driver.ErrorInfo{} }, err)
	}
	for i := range p.Entities {
		p.Entities[i].Exists = true
	}
	return nil
}

// PlanTopology plans the topology the URL describes (see
// TopologyURLOpener), through the opener registered for its scheme with
// RegisterSubscription, else with RegisterTopic. A driver that cannot
// plan one gives an error matching ErrUnsupported; other errors match the
// classes of this package, with Op "topology".
func (m *URLMux) PlanTopology(ctx context.Context, urlstr string) (*Plan, error) {
	u, err := parseURL(urlstr)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	so, sok := m.subs[u.Scheme]
	to, tok := m.topics[u.Scheme]
	m.mu.RUnlock()
	var o TopologyURLOpener
	if p, ok := so.(TopologyURLOpener); sok && ok {
		o = p
	} else if p, ok := to.(TopologyURLOpener); tok && ok {
		o = p
	}
	switch {
	case o == nil && !sok && !tok:
		return nil, unknownScheme(u.Scheme, m.subSchemes())
	case o == nil:
		return nil, newError("topology", driver.Unknown, false, fmt.Errorf("the driver of scheme %q cannot plan a topology from a URL: %w", u.Scheme, ErrUnsupported))
	}
	p, err := o.PlanTopologyURL(ctx, u)
	if err != nil {
		return nil, wrapErr("topology", func(error) driver.ErrorInfo { return driver.ErrorInfo{} }, err)
	}
	if p == nil {
		return nil, newError("topology", driver.Unknown, false, errors.New("the driver returned no plan"))
	}
	return p, nil
}

// PlanTopology plans, through DefaultURLMux, the topology the URL
// describes; see URLMux.PlanTopology.
func PlanTopology(ctx context.Context, urlstr string) (*Plan, error) {
	return defaultMux.PlanTopology(ctx, urlstr)
}
