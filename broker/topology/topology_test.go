package topology_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/broker/topology"
)

type planOpener struct{ applied []topology.Entity }

func (o *planOpener) OpenSubscriptionURL(context.Context, *url.URL) (*broker.Subscription, error) {
	return nil, errors.New("unused")
}

func (o *planOpener) PlanTopologyURL(_ context.Context, u *url.URL) (*topology.Plan, error) {
	if u.Host == "bad" {
		return nil, driver.Invalidf("bad")
	}
	return topology.NewPlan([]topology.Entity{{Kind: "queue", Name: "a", Exists: true}, {Kind: "queue", Name: "b"}},
		func(_ context.Context, missing []topology.Entity) error { o.applied = missing; return nil }), nil
}

type noPlanOpener struct{}

func (noPlanOpener) OpenSubscriptionURL(context.Context, *url.URL) (*broker.Subscription, error) {
	return nil, errors.New("unused")
}

// TestPlanURL: the mux finds the opener's plan, Apply is given the
// missing entities only, and errors carry the classes with Op topology.
func TestPlanURL(t *testing.T) {
	var m broker.URLMux
	o := &planOpener{}
	m.RegisterSubscription("plan", o)
	m.RegisterSubscription("noplan", noPlanOpener{})
	ctx := t.Context()
	p, err := topology.PlanURL(ctx, &m, "plan://ok")
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
	if _, err := topology.PlanURL(ctx, &m, "plan://bad"); !errors.Is(err, broker.ErrInvalid) || !errors.As(err, &be) || be.Op != "topology" {
		t.Errorf("bad: %v", err)
	}
	if _, err := topology.PlanURL(ctx, &m, "noplan://x"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("noplan: %v", err)
	}
	if _, err := topology.PlanURL(ctx, &m, "nope://x"); !errors.Is(err, broker.ErrInvalid) {
		t.Errorf("unknown scheme: %v", err)
	}
}
