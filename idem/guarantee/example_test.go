package guarantee_test

import (
	"fmt"
	"time"

	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/guarantee"
)

// Explain states the guarantee of a pipeline on an SQS FIFO queue: an
// outbox, an inbox with version checks, and four handlers.
func ExampleExplain() {
	b := memory.New(nil)
	defer b.Close()
	_ = b.CreateTopic("orders", &memory.TopicConfig{Profile: memory.SQSFIFO, DeliveryLimit: 5, MessageRetention: 96 * time.Hour})
	_ = b.CreateSubscription("orders", "billing")
	top, _ := b.OpenTopic("orders", nil)
	defer top.Close()
	sub, _ := b.OpenSubscription("orders", "billing", nil)
	defer sub.Close()
	tc, sc := top.Capabilities(), sub.Capabilities()
	st := guarantee.Explain(guarantee.Pipeline{Topic: &tc, Subscription: &sc, NeedOrder: true, Concurrency: 4, Outbox: &guarantee.Outbox{}, Inbox: &guarantee.Inbox{Consumer: "billing", Versioned: true}})
	for _, l := range st.Lines {
		fmt.Printf("%s: %s\n", l.Stage, l.Verdict)
	}
	fmt.Println("misconfigurations:", len(st.Findings))
	// Output:
	// publication: ok
	// transport: ok
	// order: ok
	// consumption: ok
	// effects: ok
	// misconfigurations: 0
}
