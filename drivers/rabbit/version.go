package rabbit

import (
	"strconv"
	"strings"

	"github.com/wary-go/wary/broker/driver"
)

// NoDeliveryLimit, as Topology.DeliveryLimit, states that the queue has no delivery limit. On
// RabbitMQ 3.x that is what a quorum queue declared without
// x-delivery-limit has, so it means the same as 0. From RabbitMQ 4.0 a
// quorum queue without x-delivery-limit has a default limit (see
// serverDefaultLimit), and Topology declares x-delivery-limit -1 for
// NoDeliveryLimit, which lifts it; subscriptions of a queue so declared
// (or given an unlimited delivery-limit policy) say NoDeliveryLimit.
const NoDeliveryLimit = -1

// serverVersion is a RabbitMQ version as major and minor numbers, read
// from the "version" server property of connection.start.
type serverVersion struct {
	major, minor int
	known        bool // false: the property is missing or unparsable
}

// parseVersion reads "4.0.5", "3.10.25", "4.1.0-rc.1" or "4.1.0+2.g1a2b3c";
// anything else is unknown.
func parseVersion(s string) serverVersion {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return serverVersion{}
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || major < 0 || minor < 0 || major == 0 && minor == 0 {
		return serverVersion{} // source builds report 0.0.0
	}
	return serverVersion{major: major, minor: minor, known: true}
}

func (v serverVersion) String() string {
	if !v.known {
		return "unknown"
	}
	return strconv.Itoa(v.major) + "." + strconv.Itoa(v.minor)
}

// atLeast4 reports whether v is RabbitMQ 4.0 or later. An unknown version
// counts as 4.x: assuming the default delivery limit where there is none
// refuses a configuration, assuming none where there is one drops messages.
func (v serverVersion) atLeast4() bool { return !v.known || v.major >= 4 }

// quorumDefaultLimit is RabbitMQ 4.x's default x-delivery-limit for quorum
// queues (rabbitmq-server 4.0.0 release notes: "Quorum queues now have a
// default redelivery limit set to 20").
const quorumDefaultLimit = 20

// serverDefaultLimit is the delivery limit, in deliveries (x-delivery-limit
// + 1, as DeliveryLimit counts), of a quorum queue declared without
// x-delivery-limit on a server of version v: none (0) before 4.0, 21 from
// 4.0.
func serverDefaultLimit(v serverVersion) int {
	if v.atLeast4() {
		return quorumDefaultLimit + 1
	}
	return 0
}

// effectiveLimit is the delivery limit, in deliveries, that a queue
// configured with limit (a DeliveryLimit field) has on server v: the
// configured one, none for NoDeliveryLimit, the server's default for 0.
func effectiveLimit(limit int, v serverVersion) int {
	switch {
	case limit == NoDeliveryLimit:
		return 0
	case limit > 0:
		return limit
	}
	return serverDefaultLimit(v)
}

// checkLimit validates a configured DeliveryLimit against whether the
// queue dead-letters (deadLetter) on server v. A message past the delivery
// limit of a queue without a dead-letter exchange is dropped by RabbitMQ,
// so a limit without one is refused, whether configured or the server's
// default.
func checkLimit(what string, limit int, deadLetter bool, v serverVersion) error {
	switch {
	case limit < NoDeliveryLimit:
		return driver.Invalidf("rabbit: %s.DeliveryLimit %d is negative (NoDeliveryLimit is -1)", what, limit)
	case deadLetter || limit == NoDeliveryLimit:
		return nil
	case limit > 0:
		return driver.Invalidf("rabbit: %s.DeliveryLimit needs a dead-letter exchange: past the limit RabbitMQ drops the message", what)
	case serverDefaultLimit(v) > 0:
		return driver.Invalidf("rabbit: quorum queues on RabbitMQ %s have a default delivery limit (%d deliveries) past which RabbitMQ drops a message without a dead-letter exchange: configure one, or declare the queue with x-delivery-limit -1 and set %s.DeliveryLimit to NoDeliveryLimit",
			v, serverDefaultLimit(v), what)
	}
	return nil
}
