package sbemu_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/wary-go/wary/drivers/servicebus/sbemu"
)

// waitPending polls the emulator until the entity has n next-available
// accepts waiting (there is no event to wait on from outside).
func waitPending(t *testing.T, emu *sbemu.Emulator, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		st, err := emu.State(ctxT(t), path)
		if err != nil {
			t.Fatalf("state of %s: %v", path, err)
		}
		if st.PendingAccepts == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d pending accepts, want %d", path, st.PendingAccepts, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The administration client creates queues, topics and subscriptions at run
// time, reads back their properties, and deletes them; a deleted entity is
// reported missing (GetQueue returns nil) and can be created again, empty.
func TestAdminCreateGetDelete(t *testing.T) {
	emu := sbemu.Start(t, sbemu.Topology{})
	if emu.Real {
		t.Skip("creates and deletes entities: emulator only")
	}
	ac := emu.AdminClient(t)
	client := emu.NewClient(t)
	ctx := ctxT(t)
	_, err := ac.CreateQueue(ctx, "made", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		LockDuration:                        ptr("PT5S"),
		RequiresSession:                     ptr(true),
		MaxDeliveryCount:                    ptr(int32(3)),
		DefaultMessageTimeToLive:            ptr("P1D"),
		RequiresDuplicateDetection:          ptr(true),
		DuplicateDetectionHistoryTimeWindow: ptr("PT2M30S"),
	}})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	q, err := ac.GetQueue(ctx, "made", nil)
	if err != nil || q == nil {
		t.Fatalf("GetQueue: %v, %v", q, err)
	}
	p := q.QueueProperties
	if *p.LockDuration != "PT5S" || !*p.RequiresSession || *p.MaxDeliveryCount != 3 ||
		*p.DefaultMessageTimeToLive != "P1D" || !*p.RequiresDuplicateDetection ||
		*p.DuplicateDetectionHistoryTimeWindow != "PT2M30S" || *p.MaxMessageSizeInKilobytes != 256 {
		t.Fatalf("queue properties: lock %s session %v mdc %d ttl %s dup %v window %s max %d",
			*p.LockDuration, *p.RequiresSession, *p.MaxDeliveryCount, *p.DefaultMessageTimeToLive,
			*p.RequiresDuplicateDetection, *p.DuplicateDetectionHistoryTimeWindow, *p.MaxMessageSizeInKilobytes)
	}
	if _, err := ac.CreateQueue(ctx, "made", nil); err == nil {
		t.Fatal("creating an existing queue succeeded")
	}
	// the queue serves messages, with its properties (a session queue)
	send(t, client, "made", sessionMsg("s", "one"), sessionMsg("s", "one-again"))
	r := acceptSession(t, client, "made", "s")
	if got := receiveN(t, r, 2); string(got[0].Body) != "one" || *got[0].SessionID != "s" {
		t.Fatalf("got %q", got[0].Body)
	}
	if _, err := ac.DeleteQueue(ctx, "made", nil); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	if q, err := ac.GetQueue(ctx, "made", nil); err != nil || q != nil {
		t.Fatalf("GetQueue after delete: %v, %v", q, err)
	}

	if _, err := ac.CreateTopic(ctx, "t", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{
		RequiresDuplicateDetection: ptr(true)}}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := ac.CreateSubscription(ctx, "t", "s1", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		LockDuration: ptr("PT1M"), MaxDeliveryCount: ptr(int32(7))}}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	tp, err := ac.GetTopic(ctx, "t", nil)
	if err != nil || tp == nil || !*tp.RequiresDuplicateDetection || *tp.DuplicateDetectionHistoryTimeWindow != "PT10M" {
		t.Fatalf("GetTopic: %+v, %v", tp, err)
	}
	sp, err := ac.GetSubscription(ctx, "t", "s1", nil)
	if err != nil || sp == nil || *sp.MaxDeliveryCount != 7 || *sp.LockDuration != "PT1M" || *sp.RequiresSession {
		t.Fatalf("GetSubscription: %+v, %v", sp, err)
	}
	send(t, client, "t", msg("fan"))
	sr, err := client.NewReceiverForSubscription("t", "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	if got := receiveN(t, sr, 1); string(got[0].Body) != "fan" {
		t.Fatalf("got %q", got[0].Body)
	}
	if _, err := ac.GetSubscription(ctx, "t", "missing", nil); err != nil {
		t.Fatalf("GetSubscription of a missing one: %v", err)
	}
	if _, err := ac.DeleteSubscription(ctx, "t", "s1", nil); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}
	// the open receiver loses its link
	rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err = sr.ReceiveMessages(rctx, 1, nil)
	if err == nil {
		t.Fatal("receiving from a deleted subscription succeeded")
	}
	if sbCode(err) == azservicebus.CodeTimeout {
		t.Fatalf("receiving from a deleted subscription: %v", err)
	}
}
