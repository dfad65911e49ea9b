package cli_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/cmd/wary/internal/cli"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem/outbox"
	"github.com/wary-go/wary/idem/postgres"
)

// TestOutboxStatusStream: `wary outbox status` shows the outbox stream's
// slot (a relay on a store with postgres.SourceOptions.Stream), its lag and its WAL status,
// once the slot exists.
func TestOutboxStatusStream(t *testing.T) {
	st, args := pgStore(t)
	ctx := t.Context()
	if err := st.CheckStream(ctx); err != nil {
		t.Skipf("the server cannot stream the outbox: %v", err)
	}
	w := newWary(t)
	if r := w.want(cli.ExitOK, append([]string{"outbox", "status"}, args...)...); strings.Contains(r.out, "stream") {
		t.Errorf("status before the slot exists shows a stream:\n%s", r.out)
	}
	// A streaming relay holds the slot.
	sst, err := st.WithSource(postgres.SourceOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	mb := memory.New(nil)
	t.Cleanup(func() { mb.Close() })
	if err := mb.CreateTopic("events", nil); err != nil {
		t.Fatal(err)
	}
	topic, err := mb.OpenTopic("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(sst, topic, &outbox.RelayOptions{Owner: "cli-test", PollInterval: 20 * time.Millisecond,
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(rctx) }()
	for deadline := time.Now().Add(30 * time.Second); !relay.Stats().Streaming; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not stream: %+v", relay.Stats())
		}
	}
	slot, _ := st.StreamSlot(ctx)
	stop := func() { // the relay, and its slot
		ctx := context.Background()
		stopRelay()
		<-relayDone
		for range 100 { // the walsender may still be exiting
			_, err := st.Pool().Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		stop()
		_, _ = st.Pool().Exec(context.Background(), "DROP PUBLICATION IF EXISTS "+pgx.Identifier{slot}.Sanitize())
	})
	r := w.want(cli.ExitOK, append([]string{"outbox", "status"}, args...)...)
	if !strings.Contains(r.out, "stream slot "+slot+": a relay streams") {
		t.Errorf("status:\n%s", r.out)
	}
	r = w.want(cli.ExitOK, append([]string{"outbox", "status", "--json"}, args...)...)
	var j struct {
		Stream struct {
			Slot      string `json:"slot"`
			Active    bool   `json:"active"`
			LagBytes  *int64 `json:"lag_bytes"`
			WALStatus string `json:"wal_status"`
		} `json:"stream"`
	}
	if err := json.Unmarshal([]byte(r.out), &j); err != nil || j.Stream.Slot != slot || !j.Stream.Active || j.Stream.LagBytes == nil || j.Stream.WALStatus == "" {
		t.Errorf("status --json: %+v, %v\n%s", j, err, r.out)
	}
	// wary explain states it with the store's other figures of now.
	r = w.want(cli.ExitOK, append([]string{"explain", "--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", "billing"}, args...)...)
	if !strings.Contains(r.out, "now: outbox stream slot "+slot+": a relay streams") {
		t.Errorf("explain does not show the slot:\n%s", r.out)
	}
	// The console shows the same slot on its outbox page and in its API.
	con := startConsole(t, append([]string{"--broker", "mem://orders", "--subscription", "mem://orders/billing", "--consumer", "billing"}, args...)...)
	for _, path := range []string{"/outbox", "/api/outbox"} {
		code, body := get(t, con.base+path, nil)
		if code != 200 || !strings.Contains(body, slot) || !strings.Contains(body, "wal_status") && !strings.Contains(body, "a relay streams") {
			t.Errorf("console %s: %d, the slot %s not shown:\n%s", path, code, slot, body)
		}
	}

	// A relay released the slot over the WAL budget (recorded as it does,
	// the slot gone): the status says so, and when.
	stop()
	_, err = st.Pool().Exec(ctx, `UPDATE `+pgx.Identifier{args[3], "wary_outbox_stream"}.Sanitize()+`
		SET released = 1, released_at = now(), released_lag = 123456 WHERE slot = $1`, slot)
	if err != nil {
		t.Fatal(err)
	}
	r = w.want(cli.ExitOK, append([]string{"outbox", "status"}, args...)...)
	if !strings.Contains(r.out, "stream slot "+slot+": missing") || !strings.Contains(r.out, "released over the WAL budget 1 times") {
		t.Errorf("status after a release:\n%s", r.out)
	}
	r = w.want(cli.ExitOK, append([]string{"outbox", "status", "--json"}, args...)...)
	var rj struct {
		Stream struct {
			Released    int64     `json:"released"`
			ReleasedAt  time.Time `json:"released_at"`
			ReleasedLag int64     `json:"released_lag_bytes"`
		} `json:"stream"`
	}
	if err := json.Unmarshal([]byte(r.out), &rj); err != nil || rj.Stream.Released != 1 || rj.Stream.ReleasedAt.IsZero() || rj.Stream.ReleasedLag != 123456 {
		t.Errorf("status --json after a release: %+v, %v\n%s", rj, err, r.out)
	}
}
