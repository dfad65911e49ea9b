package topology_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/broker/topology"
)

// queues is a driver's planner, as a driver writes one: it looks up the
// URL's queue and its dead-letter queue on the broker (here, a map) and
// declares those missing.
type queues struct{ onBroker map[string]int } // name → delivery limit

func (q *queues) OpenSubscriptionURL(context.Context, *url.URL) (*broker.Subscription, error) {
	return nil, errors.ErrUnsupported // not needed to plan
}

func (q *queues) PlanTopologyURL(_ context.Context, u *url.URL) (*topology.Plan, error) {
	name := u.Host
	var limit int
	if _, err := fmt.Sscan(u.Query().Get("delivery_limit"), &limit); err != nil {
		return nil, fmt.Errorf("delivery_limit: %w", broker.ErrInvalid)
	}
	dlq := topology.Entity{Kind: "dead-letter queue", Name: name + ".dlq"}
	_, dlq.Exists = q.onBroker[dlq.Name]
	queue := topology.Entity{Kind: "queue", Name: name, Settings: []string{fmt.Sprintf("delivery limit %d", limit)}}
	if held, ok := q.onBroker[name]; ok {
		queue.Exists = true
		if held != limit {
			queue.Conflicts = []capability.Conflict{{Setting: capability.SettingDeliveryLimit,
				Stated: fmt.Sprintf("delivery_limit=%d in the URL", limit), Held: fmt.Sprintf("%d deliveries", held)}}
		}
	}
	return topology.NewPlan([]topology.Entity{dlq, queue}, func(_ context.Context, missing []topology.Entity) error {
		for _, e := range missing {
			q.onBroker[e.Name] = limit
		}
		return nil
	}), nil
}

// An operator's tool (as `wary topology` does) plans what a URL needs,
// shows the differences, and declares only what is missing: an existing
// queue with other settings is reported, never changed.
func ExamplePlanURL() {
	var mux broker.URLMux
	mux.RegisterSubscription("queues", &queues{onBroker: map[string]int{"billing": 10}})
	ctx := context.Background()

	p, err := topology.PlanURL(ctx, &mux, "queues://billing?delivery_limit=5")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range p.Entities {
		fmt.Printf("%s %s exists=%t\n", e.Kind, e.Name, e.Exists)
		for _, c := range e.Conflicts {
			fmt.Printf("  %s: %s, the broker holds %s\n", c.Setting, c.Stated, c.Held)
		}
	}
	if err := p.Apply(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("missing after Apply: %d, differs: %t\n", len(p.Missing()), p.Differs())
	// Output:
	// dead-letter queue billing.dlq exists=false
	// queue billing exists=true
	//   delivery limit: delivery_limit=5 in the URL, the broker holds 10 deliveries
	// missing after Apply: 0, differs: true
}
