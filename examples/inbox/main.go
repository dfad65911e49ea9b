// Command inbox consumes versioned account events through the inbox and
// version checks of package idem, on a SQLite store (a temporary file) and
// the in-memory broker, and prints what happened to each delivery (the
// idem.Result that Inbox.Handle returns):
//
//   - a redelivered copy of an event (same message ID) is a duplicate: the
//     inbox acknowledges it without running the handler;
//   - an old event sent again under a new ID is stale: the version check
//     acknowledges it without applying it;
//   - an event that arrives before its predecessor is a gap: it is retried,
//     then parked, and its predecessor, arriving later, is held behind it;
//     an operator's replay then applies both, in version order.
//
// It exits with status 1 when the final state is not the expected one.
//
//	go -C examples run ./inbox
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/memory"
	"github.com/wary-go/wary/idem"
	"github.com/wary-go/wary/idem/sqlite"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// event is one account event: the aggregate's version after it, and the
// amount it deposits.
func event(id, account string, version int64, amount int) *broker.Message {
	ev := idem.Event{AggregateID: account, Version: version, Type: "account.deposited"}
	return &broker.Message{ID: id, Key: account, Headers: ev.Headers(), Body: []byte(strconv.Itoa(amount))}
}

// outcomes explains the results Handle returns in this demo.
var outcomes = map[idem.Result]string{
	idem.ResultApplied:    "version checked, applied",
	idem.ResultDuplicate:  "acknowledged, handler not run",
	idem.ResultStale:      "acknowledged, not applied",
	idem.ResultHeld:       "parked behind the aggregate's parked event",
	idem.ResultParked:     "gap still open after 2 attempts",
	idem.ResultGapRetried: "retried later",
}

func run(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "wary-inbox-example")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE accounts (id TEXT PRIMARY KEY, version INTEGER NOT NULL, balance INTEGER NOT NULL)`); err != nil {
		return err
	}

	b := memory.New(nil)
	defer b.Close()
	if err := errors.Join(b.CreateTopic("accounts", nil), b.CreateSubscription("accounts", "ledger")); err != nil {
		return err
	}
	topic, err := b.OpenTopic("accounts", nil)
	if err != nil {
		return err
	}
	defer topic.Close()
	sub, err := b.OpenSubscription("accounts", "ledger", nil)
	if err != nil {
		return err
	}
	defer sub.Close()

	// The version checks are the inbox's: each delivery's version is
	// checked against the accounts table, in the inbox transaction,
	// before the handler runs.
	inbox, err := idem.NewInbox(store, "ledger", sub.Capabilities(), &idem.Options{
		Versions:    idem.VersionTable{Table: "accounts", IDColumn: "id", VersionColumn: "version"},
		MaxAttempts: 2, // park a gap after two attempts (default 5)
		// This example shows broker retry and parking; on a queue that
		// keeps no order the default (idem.GapsAuto) holds a gap in the
		// store instead and applies it after its predecessor
		// (docs/gaps.md).
		Gaps:      idem.GapsRetry,
		Telemetry: broker.Telemetry{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		return err
	}
	// apply runs inside the inbox transaction, after the version check
	// passed: version 1 opens the account, later versions deposit.
	apply := func(ctx context.Context, tx *sql.Tx, d *broker.Delivery) error {
		ev, err := idem.ParseEvent(d.Message) // parses: the version check read it
		if err != nil {
			return err
		}
		amount, err := strconv.Atoi(string(d.Message.Body))
		if err != nil {
			return broker.Permanent(err)
		}
		if ev.Version == 1 {
			_, err = tx.ExecContext(ctx, `INSERT INTO accounts (id, version, balance) VALUES (?, 1, ?)`, ev.AggregateID, amount)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + ? WHERE id = ?`, amount, ev.AggregateID)
		}
		return err
	}

	// deliver publishes m and handles its deliveries (a retried one comes
	// back after the backoff) until it is settled for good. Handle says
	// what it did; a consumer normally runs sub.Run(ctx,
	// inbox.Wrap(apply), nil) instead.
	deliver := func(m *broker.Message) error {
		if err := topic.Publish(ctx, m); err != nil {
			return err
		}
		for {
			ds, err := sub.Receive(ctx, 1)
			if err != nil {
				return err
			}
			d := ds[0]
			r, herr := inbox.Handle(ctx, d, apply)
			what, ok := outcomes[r]
			if !ok {
				return fmt.Errorf("%s: unexpected outcome %v: %v", d.Message.ID, r, herr)
			}
			fmt.Fprintf(w, "%-10s %s v%s attempt %d: %s: %s\n", d.Message.ID, d.Message.Key, d.Message.Headers.Get(idem.HeaderAggregateVersion), d.Attempt, r, what)
			if r != idem.ResultGapRetried {
				return nil
			}
		}
	}

	for _, m := range []*broker.Message{
		event("evt-1", "acct-A", 1, 100),
		event("evt-2", "acct-A", 2, 10),
		event("evt-2", "acct-A", 2, 10), // evt-2 again: a producer retry, or a redelivery
		event("evt-3", "acct-B", 1, 50),
		event("evt-4", "acct-A", 3, 5),
		event("evt-9", "acct-A", 2, 10), // a producer replays version 2 under a new ID
		event("evt-6", "acct-B", 3, 7),  // before version 2 of acct-B
		event("evt-5", "acct-B", 2, 20), // version 2, late
	} {
		if err := deliver(m); err != nil {
			return err
		}
	}

	parked, err := inbox.Parked(ctx, idem.ParkedFilter{})
	if err != nil {
		return err
	}
	for _, p := range parked {
		fmt.Fprintf(w, "parked     %s v%d (%s): %s\n", p.AggregateID, p.Version, p.MessageID, p.Reason)
	}
	res, err := inbox.Replay(ctx, "acct-B", apply)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "replay     acct-B: %d replayed, %d still parked\n", res.Replayed, res.Remaining)

	want := map[string][2]int64{"acct-A": {3, 115}, "acct-B": {3, 77}}
	var errs []error
	for _, id := range []string{"acct-A", "acct-B"} {
		var version, balance int64
		if err := store.DB().QueryRowContext(ctx, `SELECT version, balance FROM accounts WHERE id = ?`, id).Scan(&version, &balance); err != nil {
			return err
		}
		fmt.Fprintf(w, "account    %s: version %d, balance %d\n", id, version, balance)
		if got := [2]int64{version, balance}; got != want[id] {
			errs = append(errs, fmt.Errorf("%s: version %d, balance %d; want version %d, balance %d", id, version, balance, want[id][0], want[id][1]))
		}
	}
	s := inbox.Stats()
	fmt.Fprintf(w, "stats      applied %d, duplicates %d, stale %d, parked %d (held %d), replayed %d\n",
		s.Applied, s.Duplicates, s.Stale, s.Parked, s.Held, s.Replayed)
	if left, err := inbox.Parked(ctx, idem.ParkedFilter{}); err != nil || len(left) != 0 {
		errs = append(errs, fmt.Errorf("still parked after the replay: %d (%v)", len(left), err))
	}
	if s.Applied != 6 || s.Duplicates != 1 || s.Stale != 1 || s.Parked != 2 || s.Held != 1 || s.Replayed != 2 {
		errs = append(errs, fmt.Errorf("unexpected stats %+v", s))
	}
	return errors.Join(errs...)
}
