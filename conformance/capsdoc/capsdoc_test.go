package capsdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wary-go/wary/broker/capability"
)

// recorder is a testing.TB that records failures instead of stopping.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *recorder) Fatal(args ...any)                 { r.failures = append(r.failures, fmt.Sprint(args...)) }

var cols = []Column{{
	Name:  "queue",
	Topic: capability.Topic{DedupWindow: 5 * time.Minute, DedupScope: capability.DedupQueue, MaxMessageSize: 256 << 10},
	Sub: capability.Subscription{Ordering: capability.OrderMessageGroup, DeliveryLimit: 5, DeliveryLimitMode: capability.LimitNative,
		LockTimeout: 30 * time.Second, RedeliveryHorizon: 336*time.Hour + 5*time.Minute},
}}

// TestCheck: a guide showing the declared table passes; one that differs
// in a single cell, or lacks the marker, fails.
func TestCheck(t *testing.T) {
	table := Table(cols)
	for _, want := range []string{"| dedup window (`DedupWindow`) | 5m |", "| max message size (`MaxMessageSize`) | 256 KiB |",
		"| delivery limit (`DeliveryLimit`, `DeliveryLimitMode`) | 5, native |", "| redelivery horizon (`RedeliveryHorizon`) | 336h5m |",
		"| lock (`LockTimeout`) | 30s |", "| max batch (`MaxBatchSize`) | no limit |"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, doc string
		fails     bool
	}{
		{"right", "# Guide\n\n" + Marker + "\n" + table + "\nmore text\n", false},
		{"wrong cell", "# Guide\n\n" + Marker + "\n" + strings.Replace(table, "| 5m |", "| 10m |", 1) + "\n", true},
		{"row missing", "# Guide\n\n" + Marker + "\n" + table[:strings.LastIndex(table[:len(table)-1], "\n")+1] + "\n", true},
		{"no marker", "# Guide\n\n" + table, true},
	} {
		path := filepath.Join(dir, c.name+".md")
		if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		r := &recorder{TB: t}
		Check(r, path, cols)
		if failed := len(r.failures) > 0; failed != c.fails {
			t.Errorf("%s: failed %v (%q), want %v", c.name, failed, r.failures, c.fails)
		}
	}
}
