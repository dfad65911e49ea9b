package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/wary-go/wary/broker/capability"
	"github.com/wary-go/wary/idem/guarantee"
)

// deadLetterLimit adds to st what the delivery limit of a RabbitMQ
// subscription's dead-letter queue means for reading it (wary dlq list,
// the console): a finding where the queue holds a limit, which a look
// counts toward before RabbitMQ 4.3 and past which RabbitMQ drops a
// message (or dead-letters it onward), and an unread setting where the
// limit could not be read. The limit is the one the driver reads when the
// dead letters open (their DeliveryLimit and Source), never a default.
// Nothing is said where the dead letters do not open (no dead-letter
// queue, or one the URL does not name), nor for other brokers.
func (a *app) deadLetterLimit(ctx context.Context, subURL string, st *guarantee.Statement) {
	switch schemeOf(subURL) {
	case "rabbit", "amqp", "amqps":
	default:
		return
	}
	dl, err := a.openDeadLetters(ctx, subURL)
	if err != nil {
		return
	}
	c := dl.Capabilities()
	_ = dl.Close()
	// "quorum queue Q through the management API at H", without the
	// details of how a consumer would see it.
	read, _, _ := strings.Cut(c.Source.Read, " (")
	switch {
	case c.DeliveryLimit > 0:
		held := fmt.Sprintf("%d deliveries", c.DeliveryLimit)
		for _, k := range c.Source.Conflicts {
			if k.Setting == capability.SettingDeliveryLimit {
				held = k.Held
			}
		}
		st.Findings = append(st.Findings, guarantee.Finding{Stage: "transport",
			Problem: "the subscription's dead-letter queue (" + read + ") has a delivery limit of " + held + ", and reading its dead letters counts toward it: " +
				"before RabbitMQ 4.3 each look of wary dlq list or the console counts once for every message, and the look that takes one past the limit drops it (or dead-letters it onward); " +
				"from 4.3 wary's put-back (basic.nack) is not counted, but another reader's basic.reject, or a channel closing on what it holds, is",
			Fix: "lift the dead-letter queue's limit: a delivery-limit policy of -1 on it (RabbitMQ 4.0 and later), or declare it anew without x-delivery-limit; " +
				"or let wary declare the topology (rabbit.Declare, wary topology --apply), whose dead-letter queue has no delivery limit"})
	case c.Source.IsUnread(capability.SettingDeliveryLimit):
		for _, u := range c.Source.Unread {
			if u.Setting != capability.SettingDeliveryLimit {
				continue
			}
			st.Unread = append(st.Unread, guarantee.Finding{Stage: "transport",
				Problem: "whether the subscription's dead-letter queue has a delivery limit, which reading its dead letters (wary dlq list, the console) counts toward before RabbitMQ 4.3, could not be read: " + u.Why,
				Fix:     u.Fix})
			return
		}
	}
}
