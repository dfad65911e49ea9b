package conformance

// Totals are a History's counts with copies included: every Sent,
// MaybeSent, Delivered and Applied call's IDs, where Report counts
// distinct IDs. Metrics that count events (messages published, delivered,
// effects applied) are compared with these.
type Totals struct {
	Sent, MaybeSent, Delivered, Applied int
}

// Totals returns the counts of everything recorded, copies included.
func (h *History) Totals() Totals {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum := func(m map[string]int) int {
		n := 0
		for _, c := range m {
			n += c
		}
		return n
	}
	return Totals{Sent: sum(h.sent), MaybeSent: sum(h.maybe), Delivered: sum(h.delivered), Applied: sum(h.applied)}
}
