package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wary-go/wary/broker"
	"github.com/wary-go/wary/drivers/kafka"
)

// txInput writes n records with IDs in-0 .. in-(n-1) to a new topic.
func txInput(t *testing.T, e *testEnv, n int) string {
	t.Helper()
	topic := e.createTopic(t, 4, "tx-in")
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i)),
			Headers: []kgo.RecordHeader{{Key: kafka.HeaderID, Value: []byte(fmt.Sprintf("in-%d", i))}}})
	}
	if err := e.producer(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return topic
}

// readAll reads topic from the start with the given isolation level until
// no record arrived for quiet (at least until want records arrived, or
// 60s passed) and counts the records per wary ID.
func readAll(t *testing.T, e *testEnv, topic string, level kgo.IsolationLevel, want int, quiet time.Duration) (map[string]int, int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got, total := map[string]int{}, 0
	deadline := time.Now().Add(60 * time.Second)
	last := time.Now()
	for time.Now().Before(deadline) && (total < want || time.Since(last) < quiet) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			last = time.Now()
			total++
			for _, h := range r.Headers {
				if h.Key == kafka.HeaderID {
					got[string(h.Value)]++
				}
			}
		})
	}
	return got, total
}

// transform is the pipeline under test: one output per input, ID
// "out-" + the input's ID.
func transform(tx *kafka.Tx, out string, msgs []*kafka.TxMessage) error {
	for _, m := range msgs {
		if err := tx.Publish(out, &broker.Message{ID: "out-" + m.Message.ID, Key: m.Message.Key, Body: m.Message.Body}); err != nil {
			return err
		}
	}
	return nil
}

// runTx runs s with h until cond holds (checked every 50ms) or 60s pass.
func runTx(t *testing.T, s *kafka.TransactSession, h kafka.TxHandler, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		runErr = s.Run(ctx, h)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	if !cond() {
		t.Fatalf("condition not met within 60s")
	}
}

// consumedAll reports whether group's committed offsets reached the end of
// every partition of in: every transaction over in committed. (Counting
// handler calls is not enough: a batch handled just before Run's ctx ends
// is aborted.)
func consumedAll(t *testing.T, e *testEnv, in, group string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := e.admin.ListEndOffsets(ctx, in)
	if err != nil {
		return false
	}
	committed, err := e.admin.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	all := true
	ends.Each(func(lo kadm.ListedOffset) {
		c, ok := committed.Lookup(lo.Topic, lo.Partition)
		all = all && ok && c.At == lo.Offset
	})
	return all
}

// checkExactlyOnce reads out with read_committed and requires one record
// per input ID, and the group's committed offsets at the end of in.
func checkExactlyOnce(t *testing.T, e *testEnv, in, out, group string, n int) {
	t.Helper()
	got, total := readAll(t, e, out, kgo.ReadCommitted(), n, time.Second)
	if total != n || len(got) != n {
		t.Errorf("read_committed: %d records, %d distinct IDs; want %d of each", total, len(got), n)
	}
	for i := range n {
		if c := got[fmt.Sprintf("out-in-%d", i)]; c != 1 {
			t.Errorf("out-in-%d seen %d times under read_committed", i, c)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := e.admin.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := e.admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(lo kadm.ListedOffset) {
		c, ok := committed.Lookup(lo.Topic, lo.Partition)
		if !ok || c.At != lo.Offset {
			t.Errorf("%s/%d: committed %d, end %d", lo.Topic, lo.Partition, c.At, lo.Offset)
		}
	})
}

func TestTransactSession(t *testing.T) {
	e := newTestEnv(t)
	const n = 300
	in := txInput(t, e, n)
	out := e.createTopic(t, 3, "tx-out")
	group := uniqueName("g")
	s, err := kafka.OpenTransactSession(t.Context(), e.txSession(t, group), in, group, &kafka.TransactOptions{MaxBatch: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var cl *kgo.Client
	if !s.As(&cl) || cl == nil || s.As(new(int)) {
		t.Fatal("As(**kgo.Client) must give the session's client, and refuse other targets")
	}
	var handled, txs atomic.Int64
	runTx(t, s, func(ctx context.Context, tx *kafka.Tx) error {
		txs.Add(1)
		for _, m := range tx.Messages {
			if m.Attempt != 1 || m.Redelivered {
				t.Errorf("%s: attempt %d without a failure", m.Message.ID, m.Attempt)
			}
		}
		handled.Add(int64(len(tx.Messages)))
		return transform(tx, out, tx.Messages)
	}, func() bool { return consumedAll(t, e, in, group) })
	if h := handled.Load(); h != n {
		t.Errorf("handled %d records, want %d (no abort happened)", h, n)
	}
	t.Logf("%d records in %d transactions", n, txs.Load())
	checkExactlyOnce(t, e, in, out, group, n)

	// Publish after the handler returned is refused.
	var kept *kafka.Tx
	ctx, cancel := context.WithCancel(context.Background())
	more := txInput(t, e, 1)
	g2 := uniqueName("g")
	s2, err := kafka.OpenTransactSession(ctx, e.txSession(t, g2), more, g2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_ = s2.Run(ctx, func(ctx context.Context, tx *kafka.Tx) error {
		kept = tx
		cancel()
		return nil
	})
	if err := kept.Publish(out, &broker.Message{ID: "late"}); !errors.Is(err, broker.ErrClosed) {
		t.Errorf("Publish after the handler: %v, want ErrClosed", err)
	}
	for name, c := range map[string]struct {
		topic string
		m     *broker.Message
	}{
		"non-UTF-8 header":    {out, &broker.Message{Headers: broker.Headers{{"h", "\xff"}}}},
		"reserved header":     {out, &broker.Message{Headers: broker.Headers{{kafka.HeaderAttempt, "7"}}}},
		"ID with a NUL":       {out, &broker.Message{ID: "a\x00b"}},
		"topic name with a /": {"a/b", &broker.Message{ID: "x"}},
	} {
		if err := kept.Publish(c.topic, c.m); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("Publish with a %s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestTransactSessionAbort injects two failures: a handler that fails in
// the middle of its first transaction, after half of its output was
// written to the log, and a TxnOffsetCommit refused by the broker (kfake
// fault) after a later transaction's output was written. Each aborts: the
// aborted output is in the log (a read_uncommitted reader sees it, which
// proves the faults fired) but never visible under read_committed, the
// input is consumed again with Attempt 2, and the final read_committed
// output has exactly one record per input.
func TestTransactSessionAbort(t *testing.T) {
	e := newTestEnv(t, kfake.NumBrokers(1))
	requireFake(t, e)
	const n = 200
	in := txInput(t, e, n)
	out := e.createTopic(t, 3, "tx-out")
	group := uniqueName("g")
	s, err := kafka.OpenTransactSession(t.Context(), e.txSession(t, group), in, group, &kafka.TransactOptions{
		MaxBatch: 30, Backoff: broker.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var (
		mu          sync.Mutex
		done        = map[string]bool{} // inputs of committed-looking transactions
		redelivered = map[string]int{}  // input ID -> attempt seen on redelivery
		txs         int
		failedOnce  bool
		abortedOut  int
	)
	var fault *kfake.FaultHandle
	runTx(t, s, func(ctx context.Context, tx *kafka.Tx) error {
		mu.Lock()
		defer mu.Unlock()
		txs++
		for _, m := range tx.Messages {
			if m.Redelivered {
				redelivered[m.Message.ID] = m.Attempt
			}
		}
		switch {
		case !failedOnce:
			// Fault 1: half the output, then fail.
			failedOnce = true
			half := tx.Messages[:len(tx.Messages)/2]
			if err := transform(tx, out, half); err != nil {
				return err
			}
			abortedOut += len(half)
			return errors.New("injected failure mid-batch")
		case txs == 3:
			// Fault 2: the broker refuses this transaction's offset
			// commit; End aborts.
			fault = e.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Group: group, Err: kerr.UnknownServerError, Count: 1})
			abortedOut += len(tx.Messages)
		}
		for _, m := range tx.Messages {
			done[m.Message.ID] = true
		}
		return transform(tx, out, tx.Messages)
	}, func() bool {
		mu.Lock()
		defer mu.Unlock()
		ok := len(done) == n && fault != nil && fault.Hits() > 0
		mu.Unlock()
		defer mu.Lock()
		return ok && consumedAll(t, e, in, group)
	})
	if fault.Hits() != 1 {
		t.Fatalf("the TxnOffsetCommit fault fired %d times, want 1", fault.Hits())
	}
	mu.Lock()
	t.Logf("%d transactions; %d outputs aborted; %d inputs redelivered", txs, abortedOut, len(redelivered))
	if len(redelivered) == 0 {
		t.Errorf("no input was redelivered after the aborts")
	}
	for id, a := range redelivered {
		if a < 2 {
			t.Errorf("%s redelivered with attempt %d", id, a)
		}
	}
	mu.Unlock()

	// The aborted output is in the log: read_uncommitted sees it.
	_, dirty := readAll(t, e, out, kgo.ReadUncommitted(), n+abortedOut, time.Second)
	if dirty != n+abortedOut {
		t.Errorf("read_uncommitted: %d records, want %d (%d committed + %d aborted)", dirty, n+abortedOut, n, abortedOut)
	}
	checkExactlyOnce(t, e, in, out, group, n)

	// A wary subscription reads committed records only (its default).
	sub, err := e.openSub(t.Context(), t, out, uniqueName("g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for quiet := 0; quiet < 4 && ctx.Err() == nil; {
		rctx, rcancel := context.WithTimeout(ctx, 250*time.Millisecond)
		ds, err := sub.Receive(rctx, 100)
		rcancel()
		if len(ds) == 0 {
			if len(seen) >= n {
				quiet++
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			continue
		}
		for _, d := range ds {
			seen[d.Message.ID]++
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	if len(seen) != n || dups != 0 {
		t.Errorf("wary subscription on the output: %d distinct IDs, %d duplicates; want %d and 0", len(seen), dups, n)
	}
}
