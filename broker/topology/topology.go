// Package topology declares and compares the entities a broker URL
// describes: the exchanges, queues, topics and subscriptions that opening
// it needs, with the settings its parameters state. PlanURL asks the
// driver registered for the URL's scheme (on a broker.URLMux) for a Plan,
// which says what exists and how it differs; Plan.Apply declares what is
// missing. Operator tools (wary topology) and deploy scripts use it;
// drivers implement URLOpener.
package topology

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/internal/seam"
)

// URLOpener plans the topology a URL describes: the exchanges, queues,
// topics and subscriptions that opening the URL needs, with the settings
// its parameters state. A driver's broker.SubscriptionURLOpener (or, for
// a scheme with no subscriptions, its broker.TopicURLOpener) implements
// it; PlanURL finds it there, as broker.URLMux.OpenDeadLetters finds a
// broker.DeadLetterURLOpener, so a scheme needs no registration of its
// own.
//
// PlanTopologyURL reads the URL with the parameters its openers accept,
// looks up each entity on the broker and changes nothing. Its errors
// match the classes of package broker as OpenSubscriptionURL's do; a URL
// that describes nothing the driver could declare is ErrInvalid.
type URLOpener interface {
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
	Conflicts []capability.Conflict `json:"conflicts,omitempty"`
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
// with other settings is an error matching broker.ErrInvalid on brokers that
// compare declarations (RabbitMQ), or left as it is. Its errors are
// *broker.Error with Op "topology", of the classes of package broker.
func (p *Plan) Apply(ctx context.Context) error {
	missing := p.Missing()
	if len(missing) == 0 {
		return nil
	}
	if p.apply == nil {
		return seam.Error("topology", fmt.Errorf("the plan declares nothing: %w", errors.ErrUnsupported))
	}
	if err := p.apply(ctx, missing); err != nil {
		return seam.Error("topology", err)
	}
	for i := range p.Entities {
		p.Entities[i].Exists = true
	}
	return nil
}

// PlanURL plans the topology the URL describes (see URLOpener), through
// the opener m registered for its scheme with RegisterSubscription, else
// with RegisterTopic; m is usually broker.DefaultURLMux(). A driver that
// cannot plan one gives an error matching errors.ErrUnsupported; other
// errors are *broker.Error with Op "topology", of the classes of package
// broker (a URL that does not parse, or a scheme no driver registered, is
// broker.ErrInvalid).
func PlanURL(ctx context.Context, m *broker.URLMux, urlstr string) (*Plan, error) {
	u, so, to, err := seam.Openers(m, urlstr)
	if err != nil {
		return nil, err
	}
	var o URLOpener
	if p, ok := so.(URLOpener); ok {
		o = p
	} else if p, ok := to.(URLOpener); ok {
		o = p
	}
	if o == nil {
		return nil, seam.Error("topology", fmt.Errorf("the driver of scheme %q cannot plan a topology from a URL: %w", u.Scheme, errors.ErrUnsupported))
	}
	p, err := o.PlanTopologyURL(ctx, u)
	if err != nil {
		return nil, seam.Error("topology", err)
	}
	if p == nil {
		return nil, seam.Error("topology", errors.New("the driver returned no plan"))
	}
	return p, nil
}
