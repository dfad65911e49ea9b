package broker_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/wary-go/wary/broker"
)

type planOpener struct{ applied []broker.Entity }

func (o *planOpener) OpenSubscriptionURL(context.Context, *url.URL) (*broker.Subscription, error) {
	return nil, errors.New("unused")
}

func (o *planOpener) PlanTopologyURL(_ context.Context, u *url.URL) (*broker.Plan, error) {
	if u.Host == "bad" {
		return nil, broker.Invalidf("bad")
	}
	return broker.NewPlan([]broker.Entity{{Kind: "queue", Name: "a", Exists: true}, {Kind: "queue", Name: "b"}},
		func(_ context.Context, missing []broker.Entity) error { o.applied = missing; return nil }), nil
}

type noPlanOpener struct{}

func (noPlanOpener) OpenSubscriptionURL(context.Context, *url.URL) (*broker.Subscription, error) {
	return nil, errors.New("unused")
}

// TestPlanTopology: the mux finds the opener's plan, Apply is given the
// missing entities only, and errors carry the classes with Op topology.
func TestPlanTopology(t *testing.T) {
	var m broker.URLMux
	o := &planOpener{}
	m.RegisterSubscription("plan", o)
	m.RegisterSubscription("noplan", noPlanOpener{})
	ctx := t.Context()
	p, err := m.PlanTopology(ctx, "plan://ok")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Missing()) != 1 || p.Differs() {
		t.Fatalf("missing %v", p.Missing())
	}
	if err := p.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if len(o.applied) != 1 || o.applied[0].Name != "b" || len(p.Missing()) != 0 {
		t.Fatalf("applied %v, missing after %v", o.applied, p.Missing())
	}
	var be *broker.Error
	if _, err := m.PlanTopology(ctx, "plan://bad"); !errors.Is(err, broker.ErrInvalid) || !errors.As(err, &be) || be.Op != "topology" {
		t.Errorf("bad: %v", err)
	}
	if _, err := m.PlanTopology(ctx, "noplan://x"); !errors.Is(err, broker.ErrUnsupported) {
		t.Errorf("noplan: %v", err)
	}
	if _, err := m.PlanTopology(ctx, "nope://x"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("unknown scheme: %v", err)
	}
}
