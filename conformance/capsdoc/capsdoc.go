// Package capsdoc renders a driver's declared capabilities as the Markdown
// table its guide in docs/brokers shows, and checks that the guide shows
// it: each driver's tests call Check with the capabilities the driver
// declares for the configurations its guide names, so a table that does
// not match the code fails the test.
package capsdoc

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// Column is one configuration of a driver, named as the guide's table
// header names it, with what the driver declares for it.
type Column struct {
	Name  string
	Topic capability.Topic
	Sub   capability.Subscription
}

// Marker opens a guide's capabilities table; the table follows on the
// next line and ends at the first line that is not a table row.
const Marker = "<!-- capabilities: generated from the driver's declarations and checked by its TestDocCapabilities -->"

// Table renders cols: one row per capability field, one column per
// configuration.
func Table(cols []Column) string {
	var b strings.Builder
	b.WriteString("| field |")
	for _, c := range cols {
		b.WriteString(" " + c.Name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + r.name + " |")
		for _, c := range cols {
			b.WriteString(" " + r.value(c) + " |")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Check fails t unless the file at path shows Table(cols) under Marker.
// On a mismatch it prints the table the driver declares, to paste.
func Check(t testing.TB, path string, cols []Column) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
		return
	}
	_, after, ok := strings.Cut(string(doc), Marker+"\n")
	if !ok {
		t.Fatalf("%s lacks the line %q followed by the capabilities table", path, Marker)
		return
	}
	var got strings.Builder
	for _, l := range strings.SplitAfter(after, "\n") {
		if !strings.HasPrefix(l, "|") {
			break
		}
		got.WriteString(l)
	}
	if want := Table(cols); got.String() != want {
		t.Errorf("%s: the capabilities table is not what the driver declares; it shows\n%s\nthe driver declares\n%s", path, got.String(), want)
	}
}

// Same fails t unless imitation promises exactly what declared does, on
// both sides (where each read them, Source, aside): a driver's tests call
// it with the memory broker's imitation of each kind of entity the driver
// offers (see docs/brokers/memory.md). On a mismatch it prints both.
func Same(t testing.TB, imitation, declared Column) {
	t.Helper()
	a, b := imitation, declared
	a.Topic.Source, a.Sub.Source, b.Topic.Source, b.Sub.Source = capability.Source{}, capability.Source{}, capability.Source{}, capability.Source{}
	if !reflect.DeepEqual(a.Topic, b.Topic) || !reflect.DeepEqual(a.Sub, b.Sub) {
		t.Errorf("%s does not promise what %s declares:\n%s", imitation.Name, declared.Name, Table([]Column{imitation, declared}))
	}
}

type row struct {
	name  string
	value func(Column) string
}

var rows = []row{
	{"ordering key (`OrderingKey`)", func(c Column) string { return orNone(c.Topic.OrderingKey) }},
	{"key required (`KeyRequired`)", func(c Column) string { return yes(c.Topic.KeyRequired) }},
	{"dedup window (`DedupWindow`)", func(c Column) string { return dur(c.Topic.DedupWindow, "none") }},
	{"dedup scope (`DedupScope`)", func(c Column) string { return c.Topic.DedupScope.String() }},
	{"max message size (`MaxMessageSize`)", func(c Column) string { return size(c.Topic.MaxMessageSize, "no limit known") }},
	{"max header size (`MaxHeaderSize`)", func(c Column) string { return size(c.Topic.MaxHeaderSize, "no separate limit") }},
	{"max batch (`MaxBatchSize`)", func(c Column) string { return count(c.Topic.MaxBatchSize, "no limit") }},
	{"ordering scope (`Ordering`)", func(c Column) string { return c.Sub.Ordering.String() }},
	{"head-of-line (`HeadOfLine`)", func(c Column) string { return yes(c.Sub.HeadOfLine) }},
	{"ack model (`AckModel`)", func(c Column) string { return c.Sub.AckModel.String() }},
	{"true delivery count (`DeliveryCount`)", func(c Column) string { return yes(c.Sub.DeliveryCount) }},
	{"delivery limit (`DeliveryLimit`, `DeliveryLimitMode`)", func(c Column) string {
		if c.Sub.DeliveryLimit == 0 {
			return "none"
		}
		return fmt.Sprintf("%d, %s", c.Sub.DeliveryLimit, c.Sub.DeliveryLimitMode)
	}},
	{"dead letters (`DeadLetter`)", func(c Column) string { return yes(c.Sub.DeadLetter) }},
	{"lock (`LockTimeout`)", func(c Column) string {
		if c.Sub.Source.IsUnread(capability.SettingLockTimeout) {
			return "unknown (not read from the broker)"
		}
		if c.Sub.LockTimeout == capability.LockNone {
			return "none: visible again at once"
		}
		return dur(c.Sub.LockTimeout, "none: held until settled")
	}},
	{"lock extendable (`LockExtendable`)", func(c Column) string { return yes(c.Sub.LockExtendable) }},
	{"nack delay (`NackDelay`)", func(c Column) string { return yes(c.Sub.NackDelay) }},
	{"redelivery horizon (`RedeliveryHorizon`)", func(c Column) string {
		switch c.Sub.RedeliveryHorizon {
		case capability.HorizonUnknown:
			return "unknown"
		case capability.HorizonUnbounded:
			return "unbounded"
		}
		return dur(c.Sub.RedeliveryHorizon, "")
	}},
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func count(n int, zero string) string {
	if n == 0 {
		return zero
	}
	return fmt.Sprint(n)
}

// dur renders d as Go does, without zero trailing units (5m, not 5m0s).
func dur(d time.Duration, zero string) string {
	if d == 0 {
		return zero
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// size renders n bytes in the largest binary unit that divides it.
func size(n int, zero string) string {
	switch {
	case n == 0:
		return zero
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
