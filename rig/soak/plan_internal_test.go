package soak

import (
	"slices"
	"testing"
)

func TestSchedule(t *testing.T) {
	kinds := []Kind{Rebalance, ConsumerKill, RelayKill, DatabaseReset, BrokerReset, LockExpiry}
	a, b := schedule(1, kinds), schedule(1, kinds)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different plans: %v, %v", a, b)
	}
	differs := false
	for seed := uint64(2); seed < 10 && !differs; seed++ {
		differs = !slices.Equal(a, schedule(seed, kinds))
	}
	if !differs {
		t.Fatal("the seed does not change the plan")
	}
	first, last := a[0], a[len(a)-1]
	if first.kind != Rebalance || first.down || last.kind != Rebalance || !last.down {
		t.Fatalf("plan %v: want the growth to 3 consumers first and the shrink to 1 last", a)
	}
	count := map[Kind]int{}
	for i, s := range a {
		count[s.kind]++
		if i > 0 && s.at <= a[i-1].at || s.at <= 0 || s.at >= 1 {
			t.Fatalf("plan %v: points not increasing inside (0, 1)", a)
		}
	}
	want := map[Kind]int{Rebalance: 2, ConsumerKill: 2, RelayKill: 1, DatabaseReset: 1, BrokerReset: 1, LockExpiry: 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("plan %v: %d of %s, want %d", a, count[k], k, n)
		}
	}
	if count[BrokerRestart] != 0 {
		t.Errorf("plan %v schedules a kind not asked for", a)
	}
}
