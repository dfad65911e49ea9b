package signal

import (
	"context"
	"testing"
	"time"
)

func TestBroadcast(t *testing.T) {
	var b Broadcast
	b.Fire() // nobody waits: nothing to close, no panic
	w1, w2 := b.Wait(), b.Wait()
	if w1 != w2 {
		t.Fatal("two waits before one Fire got different channels")
	}
	select {
	case <-w1:
		t.Fatal("closed before Fire")
	default:
	}
	b.Fire()
	<-w1 // closed by Fire, or the test hangs
	w3 := b.Wait()
	select {
	case <-w3:
		t.Fatal("a wait after Fire is closed by the earlier Fire")
	default:
	}
	b.Fire()
	<-w3
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), 0) {
		t.Error("Sleep(0) reported the context done")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on a canceled context reported the hour passed")
	}
}
