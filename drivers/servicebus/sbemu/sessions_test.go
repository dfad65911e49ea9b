package sbemu_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

func sessionMsg(session, body string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body), SessionID: &session}
}

func acceptSession(t *testing.T, client *azservicebus.Client, queue, session string) *azservicebus.SessionReceiver {
	t.Helper()
	r, err := client.AcceptSessionForQueue(ctxT(t), queue, session, nil)
	if err != nil {
		t.Fatalf("AcceptSessionForQueue(%s, %s): %v", queue, session, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// A named session: the attach's session filter comes back with the id and
// com.microsoft:locked-until-utc; messages are FIFO within the session and
// only that session's messages arrive.
func TestSessionNamedFIFO(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "sess", RequiresSession: true}}})
	var msgs []*azservicebus.Message
	for i := 0; i < 5; i++ {
		msgs = append(msgs, sessionMsg("A", fmt.Sprintf("a%d", i)), sessionMsg("B", fmt.Sprintf("b%d", i)))
	}
	send(t, client, "sess", msgs...)
	before := time.Now().Add(-time.Minute)
	r := acceptSession(t, client, "sess", "B")
	if r.SessionID() != "B" {
		t.Fatalf("session id %q", r.SessionID())
	}
	if !r.LockedUntil().After(before) {
		t.Fatalf("locked until %v: com.microsoft:locked-until-utc missing or wrong", r.LockedUntil())
	}
	got := receiveN(t, r, 5)
	for i, m := range got {
		if want := fmt.Sprintf("b%d", i); string(m.Body) != want || m.SessionID == nil || *m.SessionID != "B" {
			t.Fatalf("message %d: %q (session %v), want %s", i, m.Body, m.SessionID, want)
		}
		if m.LockedUntil == nil || !m.LockedUntil.Equal(r.LockedUntil()) {
			t.Fatalf("message lock %v, want the session lock %v", m.LockedUntil, r.LockedUntil())
		}
		if err := r.CompleteMessage(ctxT(t), m, nil); err != nil {
			t.Fatalf("CompleteMessage: %v", err)
		}
	}
	receiveNone(t, r, 300*time.Millisecond)
}

// Next-available picks a session with messages, and waits for one to appear
// when there is none.
func TestSessionNextAvailable(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "next", RequiresSession: true}}})
	send(t, client, "next", sessionMsg("S1", "one"))
	r, err := client.AcceptNextSessionForQueue(ctxT(t), "next", nil)
	if err != nil {
		t.Fatalf("AcceptNextSessionForQueue: %v", err)
	}
	defer r.Close(context.Background())
	if r.SessionID() != "S1" {
		t.Fatalf("next session %q, want S1", r.SessionID())
	}
	// S1 is locked: the next accept waits until S2 gets a message
	type result struct {
		r   *azservicebus.SessionReceiver
		err error
	}
	done := make(chan result, 1)
	go func() {
		r2, err := client.AcceptNextSessionForQueue(ctxT(t), "next", nil)
		done <- result{r2, err}
	}()
	send(t, client, "next", sessionMsg("S2", "two"))
	res := <-done
	if res.err != nil {
		t.Fatalf("AcceptNextSessionForQueue (waiting): %v", res.err)
	}
	defer res.r.Close(context.Background())
	if res.r.SessionID() != "S2" {
		t.Fatalf("second next session %q, want S2", res.r.SessionID())
	}
	got := receiveN(t, res.r, 1)[0]
	if string(got.Body) != "two" {
		t.Fatalf("got %q", got.Body)
	}
}

// With no session available, next-available gives up after the client's
// timeout with com.microsoft:timeout.
func TestSessionNextAvailableTimeout(t *testing.T) {
	emu, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "empty", RequiresSession: true}}})
	if emu.Real {
		t.Skip("the service's own session-accept timeout is up to a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := client.AcceptNextSessionForQueue(ctx, "empty", nil)
	if code := sbCode(err); code != azservicebus.CodeTimeout {
		t.Fatalf("AcceptNextSessionForQueue on an empty queue: %v (code %q), want a timeout", err, code)
	}
}

// A session is locked by one receiver at a time; closing the receiver
// releases it, and its unsettled messages come back without a delivery
// counted (the service counts one only when a session lock expires).
func TestSessionExclusiveUntilClose(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "excl", RequiresSession: true}}})
	send(t, client, "excl", sessionMsg("X", "x"))
	r1, err := client.AcceptSessionForQueue(ctxT(t), "excl", "X", nil)
	if err != nil {
		t.Fatalf("AcceptSessionForQueue: %v", err)
	}
	got := receiveN(t, r1, 1)[0]
	if _, err := client.AcceptSessionForQueue(ctxT(t), "excl", "X", nil); err == nil {
		t.Fatal("a second receiver locked a session that is already locked")
	}
	if err := r1.Close(ctxT(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r2 := acceptSession(t, client, "excl", "X")
	again := receiveN(t, r2, 1)[0]
	// closing a session does not count a delivery (only lock expiry does)
	if string(again.Body) != "x" || again.DeliveryCount != got.DeliveryCount {
		t.Fatalf("after close got %q count %d, want x with %d", again.Body, again.DeliveryCount, got.DeliveryCount)
	}
	if err := r2.CompleteMessage(ctxT(t), again, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

// A session lock that is not renewed expires: the session becomes free for
// another receiver and its unsettled message comes back with the delivery
// count increased.
func TestSessionLockExpiry(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "sexp", RequiresSession: true, LockDuration: 2 * time.Second}}})
	send(t, client, "sexp", sessionMsg("E", "e"))
	r1 := acceptSession(t, client, "sexp", "E")
	first := receiveN(t, r1, 1)[0]
	deadline := time.Now().Add(waitTimeout)
	var r2 *azservicebus.SessionReceiver
	for r2 == nil {
		r, err := client.AcceptSessionForQueue(ctxT(t), "sexp", "E", nil)
		if err == nil {
			r2 = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never freed: %v", err)
		}
		waitFor(t, 100*time.Millisecond)
	}
	defer r2.Close(context.Background())
	again := receiveN(t, r2, 1)[0]
	if string(again.Body) != "e" || again.DeliveryCount != first.DeliveryCount+1 {
		t.Fatalf("got %q count %d, want e with %d", again.Body, again.DeliveryCount, first.DeliveryCount+1)
	}
	if err := r2.CompleteMessage(ctxT(t), again, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	// the SDK retries a session's lock-lost settlement: bound it
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := r1.CompleteMessage(ctx, first, nil); err == nil {
		t.Fatal("completing with a lost session lock succeeded")
	}
}

// renew-session-lock moves the session's locked-until; get/set-session-state
// keep state per session.
func TestSessionRenewAndState(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "state", RequiresSession: true, LockDuration: 30 * time.Second}}})
	r := acceptSession(t, client, "state", "S")
	before := r.LockedUntil()
	// let the clock move past the millisecond of the accept, then renew once
	waitFor(t, 50*time.Millisecond)
	if err := r.RenewSessionLock(ctxT(t), nil); err != nil {
		t.Fatalf("RenewSessionLock: %v", err)
	}
	if !r.LockedUntil().After(before) {
		t.Fatalf("session lock did not move: %v -> %v", before, r.LockedUntil())
	}
	state, err := r.GetSessionState(ctxT(t), nil)
	if err != nil || state != nil {
		t.Fatalf("initial state %q, %v; want nil", state, err)
	}
	if err := r.SetSessionState(ctxT(t), []byte("step-2"), nil); err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	other := acceptSession(t, client, "state", "T")
	if st, err := other.GetSessionState(ctxT(t), nil); err != nil || st != nil {
		t.Fatalf("session T sees state %q, %v", st, err)
	}
	state, err = r.GetSessionState(ctxT(t), nil)
	if err != nil || string(state) != "step-2" {
		t.Fatalf("state %q, %v; want step-2", state, err)
	}
	if err := r.SetSessionState(ctxT(t), nil, nil); err != nil {
		t.Fatalf("SetSessionState(nil): %v", err)
	}
	if state, err = r.GetSessionState(ctxT(t), nil); err != nil || len(state) != 0 {
		t.Fatalf("cleared state %q, %v", state, err)
	}
}

// Sessions work the same on a subscription (<topic>/Subscriptions/<sub>).
func TestSessionOnSubscription(t *testing.T) {
	_, client := env(t, sbemu.Topology{Topics: []sbemu.Topic{{Name: "st", Subscriptions: []sbemu.Subscription{{Name: "s", RequiresSession: true}}}}})
	send(t, client, "st", sessionMsg("K", "k1"), sessionMsg("L", "l1"), sessionMsg("K", "k2"))
	r, err := client.AcceptSessionForSubscription(ctxT(t), "st", "s", "K", nil)
	if err != nil {
		t.Fatalf("AcceptSessionForSubscription: %v", err)
	}
	defer r.Close(context.Background())
	got := receiveN(t, r, 2)
	if bodies(got)[0] != "k1" || bodies(got)[1] != "k2" {
		t.Fatalf("got %v, want [k1 k2]", bodies(got))
	}
	next, err := client.AcceptNextSessionForSubscription(ctxT(t), "st", "s", nil)
	if err != nil {
		t.Fatalf("AcceptNextSessionForSubscription: %v", err)
	}
	defer next.Close(context.Background())
	if next.SessionID() != "L" {
		t.Fatalf("next session %q, want L", next.SessionID())
	}
}

// A session-less receiver on a session entity is refused, as the service does.
func TestSessionRequired(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "needs", RequiresSession: true}}})
	r, err := client.NewReceiverForQueue("needs", nil)
	if err != nil {
		t.Fatalf("NewReceiverForQueue: %v", err)
	}
	defer r.Close(context.Background())
	if _, err := r.ReceiveMessages(ctxT(t), 1, nil); err == nil {
		t.Fatal("a receiver without a session was allowed on a session queue")
	}
}

// get-message-sessions lists sessions with messages and sessions with state.
func TestListSessions(t *testing.T) {
	_, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "list", RequiresSession: true}}})
	send(t, client, "list", sessionMsg("A", "a"), sessionMsg("B", "b"))
	c := acceptSession(t, client, "list", "C")
	if err := c.SetSessionState(ctxT(t), []byte("s"), nil); err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	seen := map[string]bool{}
	pager := client.NewListSessionsForQueuePager("list", nil)
	for pager.More() {
		page, err := pager.NextPage(ctxT(t))
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		for _, id := range page.Sessions {
			seen[id] = true
		}
	}
	if len(seen) != 3 || !seen["A"] || !seen["B"] || !seen["C"] {
		t.Fatalf("sessions %v, want A B C", seen)
	}
}

// A next-available accept the client gave up on (its context cancelled
// before any session turned up) must not lock the next session that gets a
// message: a named accept of that session succeeds at once.
func TestSessionCancelledAcceptLeavesNoLock(t *testing.T) {
	emu, client := env(t, sbemu.Topology{Queues: []sbemu.Queue{{Name: "cancelled", RequiresSession: true, LockDuration: 30 * time.Second}}})
	if emu.Real {
		t.Skip("a cancelled accept on the service is abandoned the same way; the check is for the emulator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := client.AcceptNextSessionForQueue(ctx, "cancelled", &azservicebus.SessionReceiverOptions{})
	cancel()
	if err == nil {
		t.Fatal("AcceptNextSessionForQueue on an empty queue returned a session")
	}
	// a context cancelled well before the server's timeout
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := client.AcceptNextSessionForQueue(ctx2, "cancelled", nil)
		done <- err
	}()
	// the cancelled accept's attach must have reached the emulator: wait
	// until the emulator reports it pending
	waitPending(t, emu, "cancelled", 1)
	cancel2()
	if err := <-done; err == nil {
		t.Fatal("cancelled AcceptNextSessionForQueue returned a session")
	}
	send(t, client, "cancelled", sessionMsg("late", "m"))
	r := acceptSession(t, client, "cancelled", "late")
	if got := receiveN(t, r, 1)[0]; string(got.Body) != "m" {
		t.Fatalf("got %q", got.Body)
	}
}
