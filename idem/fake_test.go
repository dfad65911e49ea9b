package idem

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wary-go/wary/idem/internal/seam"
)

// This file is a fake of the store seam below the inbox (inboxStore, and
// optionally earlyStore and expirer), as gocloud tests pubsub against a
// fake driver: in memory, map-based, with the transaction semantics the
// SQL stores give (one writer at a time, as SQLite; commit or roll back
// all of a transaction's writes; savepoints), and fault switches. The
// store suites (idem/internal/idemtest, through idem/sqlite and
// idem/postgres) keep checking the SQL; the tests beside this file check
// the inbox's own logic against it.

// fakeTx is the fake's transaction, the Tx of the inboxes under test. A
// handler writes its effects through it (apply, setVersion).
type fakeTx struct {
	db *fakeDB
	// st is the transaction's own copy of the state, which Commit
	// installs; save is the savepoint's copy.
	st, save *fakeState
	done     bool
	// own: a transaction of the store's own (a method that takes no Tx).
	own bool
	// claimed are the message IDs this transaction claimed; ops the store
	// calls made in it, in order.
	claimed []string
	ops     []string
}

// apply records one application of the effect of message id (the effect
// a test counts: applied twice would be a bug).
func (tx *fakeTx) apply(id string) error {
	if tx.done {
		return errTxDone
	}
	tx.st.effects[id]++
	tx.st.log = append(tx.st.log, id)
	return nil
}

// setVersion inserts or sets the version row of aggregate in the version
// table t (a handler of version 1 inserts it).
func (tx *fakeTx) setVersion(t VersionTable, aggregate string, v int64) error {
	if tx.done {
		return errTxDone
	}
	tx.st.version(t)[aggregate] = v
	return nil
}

// fkey is a (consumer, message ID) pair.
type fkey struct{ consumer, id string }

// ekey is an early event's key.
type ekey struct {
	consumer, aggregate string
	version             int64
}

type fakeFailure struct {
	attempts          int
	first, last       time.Time
	reason            string
	consumer, message string
}

// fakeState is what the fake stores: the inbox's tables, the early
// events, the users' version and state tables, and the effects handlers
// applied.
type fakeState struct {
	inbox    map[fkey]time.Time
	failures map[fkey]fakeFailure
	parked   []Parked
	nextID   int64
	early    map[ekey]seam.EarlyEvent
	versions map[string]map[string]int64 // table -> aggregate -> version
	states   map[string]map[string]string
	effects  map[string]int // message ID -> times applied
	log      []string       // the effects in the order applied
}

func newFakeState() *fakeState {
	return &fakeState{inbox: map[fkey]time.Time{}, failures: map[fkey]fakeFailure{}, early: map[ekey]seam.EarlyEvent{},
		versions: map[string]map[string]int64{}, states: map[string]map[string]string{}, effects: map[string]int{}}
}

func (s *fakeState) clone() *fakeState {
	c := &fakeState{inbox: maps.Clone(s.inbox), failures: maps.Clone(s.failures), parked: slices.Clone(s.parked), nextID: s.nextID,
		early: maps.Clone(s.early), versions: map[string]map[string]int64{}, states: map[string]map[string]string{}, effects: maps.Clone(s.effects), log: slices.Clone(s.log)}
	for k, v := range s.versions {
		c.versions[k] = maps.Clone(v)
	}
	for k, v := range s.states {
		c.states[k] = maps.Clone(v)
	}
	return c
}

func (s *fakeState) version(t VersionTable) map[string]int64 {
	m := s.versions[t.Table]
	if m == nil {
		m = map[string]int64{}
		s.versions[t.Table] = m
	}
	return m
}

// match reports whether p is selected by consumer and f (Limit aside).
func (f ParkedFilter) match(consumer string, p *Parked) bool {
	return p.Consumer == consumer && (!f.HasAggregate || p.AggregateID == f.AggregateID) &&
		(!f.HasAfter || p.AggregateID > f.AfterAggregate) && (f.ID == 0 || p.ID == f.ID)
}

// fakeDB is the fake database. One transaction runs at a time (sem), as
// SQLite's writer lock; a caller that waits longer than lockWait gets an
// error, as SQLite's busy timeout gives one, so that a transaction left
// open fails a test instead of hanging it.
type fakeDB struct {
	sem chan struct{}

	mu      sync.Mutex
	st      *fakeState
	faults  map[string][]error
	hooks   map[string][]func(context.Context) error
	calls   map[string]int
	commits [][]string // the claimed IDs of each committed transaction of the inbox's
	// lastOps are the store calls of the last committed transaction.
	lastOps []string

	// early: the driver implements earlyStore; expires: expirer; lazy:
	// BeginClaim begins nothing when it claims nothing (as PostgreSQL's).
	early, expires, lazy bool
}

const lockWait = 10 * time.Second

var (
	errTxDone  = errors.New("fake: transaction is over")
	errLocked  = errors.New("fake: database is locked (a transaction left open?)")
	errInject  = errors.New("fake: injected failure")
	errFakeCon = errors.New("fake: conflict with a concurrent transaction")
)

func newFakeDB(t testing.TB) *fakeDB {
	db := &fakeDB{sem: make(chan struct{}, 1), st: newFakeState(), faults: map[string][]error{}, hooks: map[string][]func(context.Context) error{}, calls: map[string]int{}}
	t.Cleanup(func() {
		select {
		case db.sem <- struct{}{}:
			<-db.sem
		default:
			t.Errorf("fake store: a transaction was left open")
		}
	})
	return db
}

// Driver is the fake's handle, as a store hands it to NewInbox.
func (db *fakeDB) Driver() seam.Driver[*fakeTx] {
	base := fakeInbox{db}
	switch {
	case db.early:
		return seam.NewDriver[*fakeTx](fakeEarly{base})
	case db.expires:
		return seam.NewDriver[*fakeTx](fakeExpiring{base})
	}
	return seam.NewDriver[*fakeTx](base)
}

// failNext makes the next calls of op (a method name) fail, one error
// each, in order.
func (db *fakeDB) failNext(op string, errs ...error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.faults[op] = append(db.faults[op], errs...)
}

// before has the next call of op run f first (and fail with its error),
// after the failures failNext injected.
func (db *fakeDB) before(op string, f func(ctx context.Context) error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.hooks[op] = append(db.hooks[op], f)
}

// call counts a call of op and returns its injected failure, if any, or
// runs its hook.
func (db *fakeDB) call(ctx context.Context, op string) error {
	db.mu.Lock()
	db.calls[op]++
	if errs := db.faults[op]; len(errs) > 0 {
		db.faults[op] = errs[1:]
		db.mu.Unlock()
		return errs[0]
	}
	var hook func(context.Context) error
	if hs := db.hooks[op]; len(hs) > 0 {
		hook, db.hooks[op] = hs[0], hs[1:]
	}
	db.mu.Unlock()
	if hook != nil {
		return hook(ctx)
	}
	return nil
}

func (db *fakeDB) count(op string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.calls[op]
}

// view returns a copy of the committed state.
func (db *fakeDB) view() *fakeState {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.st.clone()
}

// seed changes the committed state (no transaction may be open).
func (db *fakeDB) seed(f func(s *fakeState)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	f(db.st)
}

func (db *fakeDB) committed() [][]string {
	db.mu.Lock()
	defer db.mu.Unlock()
	return slices.Clone(db.commits)
}

func (db *fakeDB) lock(ctx context.Context) error {
	t := time.NewTimer(lockWait)
	defer t.Stop()
	select {
	case db.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errLocked
	}
}

func (db *fakeDB) begin(ctx context.Context) (*fakeTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.lock(ctx); err != nil {
		return nil, err
	}
	return &fakeTx{db: db, st: db.view()}, nil
}

// end ends tx, installing its state if commit.
func (db *fakeDB) end(tx *fakeTx, commit bool) {
	db.mu.Lock()
	if commit {
		db.st = tx.st
		if !tx.own {
			db.commits = append(db.commits, tx.claimed)
			db.lastOps = tx.ops
		}
	}
	db.mu.Unlock()
	tx.done = true
	<-db.sem
}

// inTx runs f in a transaction of its own, as the store's methods that
// take no Tx do.
func (db *fakeDB) inTx(ctx context.Context, f func(s *fakeState) error) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	tx.own = true
	if err := f(tx.st); err != nil {
		db.end(tx, false)
		return err
	}
	db.end(tx, true)
	return nil
}

// fakeInbox implements inboxStore and conflicts.
type fakeInbox struct{ db *fakeDB }

// use checks that tx is a live transaction of this store and records op.
func (s fakeInbox) use(ctx context.Context, tx *fakeTx, op string) error {
	if err := s.db.call(ctx, op); err != nil {
		return err
	}
	if tx == nil || tx.db != s.db {
		return fmt.Errorf("fake: %s: not a transaction of this store", op)
	}
	if tx.done {
		return fmt.Errorf("fake: %s: %w", op, errTxDone)
	}
	tx.ops = append(tx.ops, op)
	return nil
}

func (s fakeInbox) Begin(ctx context.Context) (*fakeTx, error) {
	if err := s.db.call(ctx, "Begin"); err != nil {
		return nil, err
	}
	return s.db.begin(ctx)
}

func (s fakeInbox) Commit(ctx context.Context, tx *fakeTx) error {
	if tx == nil || tx.done {
		return errTxDone
	}
	err := s.db.call(ctx, "Commit")
	if err == nil {
		err = ctx.Err() // a commit cut off: as a database client, nothing committed
	}
	if err != nil {
		s.db.end(tx, false) // a failed commit leaves nothing
		return err
	}
	s.db.end(tx, true)
	return nil
}

func (s fakeInbox) Rollback(ctx context.Context, tx *fakeTx) error {
	s.db.call(ctx, "Rollback")
	if tx == nil || tx.done {
		return nil
	}
	s.db.end(tx, false)
	return nil
}

func (s fakeInbox) Claim(ctx context.Context, tx *fakeTx, r seam.ClaimRequest) ([]seam.Claimed, error) {
	if err := s.use(ctx, tx, "Claim"); err != nil {
		return nil, err
	}
	out := make([]seam.Claimed, len(r.IDs))
	for i, id := range r.IDs {
		k := fkey{r.Consumer, id}
		if _, ok := tx.st.inbox[k]; ok {
			continue
		}
		tx.st.inbox[k] = r.At
		tx.claimed = append(tx.claimed, id)
		out[i].New = true
		if r.Aggregates != nil && r.Aggregates[i] != "" {
			out[i].Held = slices.ContainsFunc(tx.st.parked, func(p Parked) bool {
				return p.Consumer == r.Consumer && p.AggregateID == r.Aggregates[i]
			})
		}
	}
	return out, nil
}

func (s fakeInbox) BeginClaim(ctx context.Context, r seam.ClaimRequest) (*fakeTx, bool, []seam.Claimed, error) {
	if err := s.db.call(ctx, "BeginClaim"); err != nil {
		return nil, false, nil, err
	}
	tx, err := s.db.begin(ctx)
	if err != nil {
		return nil, false, nil, err
	}
	c, err := s.Claim(ctx, tx, r)
	if err != nil {
		s.db.end(tx, false)
		return nil, false, nil, err
	}
	if s.db.lazy && !slices.ContainsFunc(c, func(c seam.Claimed) bool { return c.New }) {
		s.db.end(tx, false)
		return nil, false, nil, nil
	}
	return tx, true, c, nil
}

func (s fakeInbox) Purge(ctx context.Context, consumer string, before time.Time, limit int) (int, error) {
	if err := s.db.call(ctx, "Purge"); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.inTx(ctx, func(st *fakeState) error {
		n = st.purge(consumer, before, limit)
		return nil
	})
	return n, err
}

// purge deletes at most limit of consumer's claims made before before,
// oldest first, and its failures last seen before it.
func (s *fakeState) purge(consumer string, before time.Time, limit int) int {
	var old []fkey
	for k, at := range s.inbox {
		if k.consumer == consumer && at.Before(before) {
			old = append(old, k)
		}
	}
	slices.SortFunc(old, func(a, b fkey) int { return s.inbox[a].Compare(s.inbox[b]) })
	old = old[:min(len(old), limit)]
	for _, k := range old {
		delete(s.inbox, k)
	}
	maps.DeleteFunc(s.failures, func(k fkey, f fakeFailure) bool { return k.consumer == consumer && f.last.Before(before) })
	return len(old)
}

func (s fakeInbox) CheckVersion(ctx context.Context, tx *fakeTx, t VersionTable, id string, version int64) (VersionCheck, error) {
	if err := s.use(ctx, tx, "CheckVersion "+id); err != nil {
		return VersionCheck{}, err
	}
	rows := tx.st.version(t)
	cur, ok := rows[id]
	switch {
	case !ok:
		return VersionCheck{Result: VersionMissing}, nil
	case cur == version-1:
		rows[id] = version
		return VersionCheck{Result: VersionApplied, Current: version}, nil
	case cur >= version:
		return VersionCheck{Result: VersionStale, Current: cur}, nil
	}
	return VersionCheck{Result: VersionGap, Current: cur}, nil
}

func (s fakeInbox) Transition(ctx context.Context, tx *fakeTx, t StateTable, id, to string, from ...string) (TransitionCheck, error) {
	if err := s.use(ctx, tx, "Transition"); err != nil {
		return TransitionCheck{}, err
	}
	rows := tx.st.states[t.Table]
	cur, ok := rows[id]
	switch {
	case !ok:
		return TransitionCheck{Result: TransitionMissing}, nil
	case cur == to:
		return TransitionCheck{Result: TransitionAlready, State: cur}, nil
	case slices.Contains(from, cur):
		rows[id] = to
		return TransitionCheck{Result: TransitionApplied, State: to}, nil
	}
	return TransitionCheck{Result: TransitionInvalid, State: cur}, nil
}

func (s fakeInbox) RecordFailure(ctx context.Context, consumer, messageID, reason string, at time.Time) (int, time.Time, error) {
	if err := s.db.call(ctx, "RecordFailure"); err != nil {
		return 0, time.Time{}, err
	}
	var f fakeFailure
	err := s.db.inTx(ctx, func(st *fakeState) error {
		k := fkey{consumer, messageID}
		f = st.failures[k]
		if f.attempts == 0 {
			f.first, f.consumer, f.message = at, consumer, messageID
		}
		f.attempts++
		f.last, f.reason = at, reason
		st.failures[k] = f
		return nil
	})
	return f.attempts, f.first, err
}

func (s fakeInbox) ClearFailure(ctx context.Context, tx *fakeTx, consumer, messageID string) error {
	if err := s.use(ctx, tx, "ClearFailure"); err != nil {
		return err
	}
	delete(tx.st.failures, fkey{consumer, messageID})
	return nil
}

func (s fakeInbox) Park(ctx context.Context, tx *fakeTx, p *Parked) error {
	if err := s.use(ctx, tx, "Park"); err != nil {
		return err
	}
	if slices.ContainsFunc(tx.st.parked, func(q Parked) bool { return q.Consumer == p.Consumer && q.MessageID == p.MessageID }) {
		return nil
	}
	tx.st.nextID++
	q := *p
	q.ID = tx.st.nextID
	q.Headers = p.Headers.Clone()
	q.Body = slices.Clone(p.Body)
	tx.st.parked = append(tx.st.parked, q)
	return nil
}

// sortedParked is s's parked messages of consumer matching f, in replay
// order (aggregate, version, sequence, parking order).
func (s *fakeState) sortedParked(consumer string, f ParkedFilter) []Parked {
	var out []Parked
	for _, p := range s.parked {
		if f.match(consumer, &p) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b Parked) int {
		if c := strings.Compare(a.AggregateID, b.AggregateID); c != 0 {
			return c
		}
		if a.Version != b.Version {
			return int(a.Version - b.Version)
		}
		if a.Sequence != b.Sequence {
			return int(a.Sequence - b.Sequence)
		}
		return int(a.ID - b.ID)
	})
	return out
}

func (s fakeInbox) ListParked(ctx context.Context, consumer string, f ParkedFilter) ([]Parked, error) {
	if err := s.db.call(ctx, "ListParked"); err != nil {
		return nil, err
	}
	var out []Parked
	err := s.db.inTx(ctx, func(st *fakeState) error {
		out = st.sortedParked(consumer, f)
		if f.Limit > 0 && len(out) > f.Limit {
			out = out[:f.Limit]
		}
		if f.NoBody {
			for i := range out {
				out[i].Body = nil
			}
		}
		return nil
	})
	return out, err
}

func (s fakeInbox) CountParked(ctx context.Context, consumer string, f ParkedFilter) (int, error) {
	if err := s.db.call(ctx, "CountParked"); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.inTx(ctx, func(st *fakeState) error {
		n = len(st.sortedParked(consumer, f))
		return nil
	})
	return n, err
}

func (s fakeInbox) DeleteParked(ctx context.Context, tx *fakeTx, consumer string, id int64) (bool, error) {
	if err := s.use(ctx, tx, "DeleteParked"); err != nil {
		return false, err
	}
	n := len(tx.st.parked)
	tx.st.parked = slices.DeleteFunc(tx.st.parked, func(p Parked) bool { return p.Consumer == consumer && p.ID == id })
	return len(tx.st.parked) < n, nil
}

func (s fakeInbox) UpdateParked(ctx context.Context, consumer string, id int64, reason string, at time.Time) error {
	if err := s.db.call(ctx, "UpdateParked"); err != nil {
		return err
	}
	return s.db.inTx(ctx, func(st *fakeState) error {
		for i := range st.parked {
			if p := &st.parked[i]; p.Consumer == consumer && p.ID == id {
				p.Reason, p.LastSeen = reason, at
				p.Attempts++
			}
		}
		return nil
	})
}

func (s fakeInbox) DiscardParked(ctx context.Context, consumer string, f ParkedFilter) (int, error) {
	if err := s.db.call(ctx, "DiscardParked"); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.inTx(ctx, func(st *fakeState) error {
		before := len(st.parked)
		st.parked = slices.DeleteFunc(st.parked, func(p Parked) bool { return f.match(consumer, &p) })
		n = before - len(st.parked)
		return nil
	})
	return n, err
}

// Conflict implements conflicts: errFakeCon is a conflict.
func (s fakeInbox) Conflict(err error) bool { return errors.Is(err, errFakeCon) }

// fakeExpiring is fakeInbox with expirer.
type fakeExpiring struct{ fakeInbox }

func (s fakeExpiring) Expire(ctx context.Context, consumer string, now time.Time, retention time.Duration, limit int) (int, error) {
	if err := s.db.call(ctx, "Expire"); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.inTx(ctx, func(st *fakeState) error {
		n = st.purge(consumer, now.Add(-retention), limit)
		return nil
	})
	return n, err
}

// fakeEarly is fakeInbox with earlyStore.
type fakeEarly struct{ fakeInbox }

func (s fakeEarly) LockAggregate(ctx context.Context, tx *fakeTx, consumer, aggregateID string) error {
	return s.use(ctx, tx, "Lock "+aggregateID)
}

func (s fakeEarly) LockAggregates(ctx context.Context, tx *fakeTx, consumer string, aggregateIDs []string) error {
	return s.use(ctx, tx, "Lock "+strings.Join(slices.Sorted(slices.Values(aggregateIDs)), ","))
}

func (s fakeEarly) HoldEarly(ctx context.Context, tx *fakeTx, e *seam.EarlyEvent) (bool, time.Time, error) {
	if err := s.use(ctx, tx, "HoldEarly"); err != nil {
		return false, time.Time{}, err
	}
	k := ekey{e.Consumer, e.AggregateID, e.Version}
	_, dup := tx.st.early[k]
	if !dup {
		c := *e
		c.Headers, c.Body = e.Headers.Clone(), slices.Clone(e.Body)
		tx.st.early[k] = c
	}
	var oldest time.Time
	for k, h := range tx.st.early {
		if k.consumer == e.Consumer && k.aggregate == e.AggregateID && (oldest.IsZero() || h.HeldAt.Before(oldest)) {
			oldest = h.HeldAt
		}
	}
	return !dup, oldest, nil
}

func (s fakeEarly) TakeEarly(ctx context.Context, tx *fakeTx, consumer, aggregateID string, version int64) (*seam.EarlyEvent, error) {
	if err := s.use(ctx, tx, "TakeEarly"); err != nil {
		return nil, err
	}
	k := ekey{consumer, aggregateID, version}
	e, ok := tx.st.early[k]
	if !ok {
		return nil, nil
	}
	delete(tx.st.early, k)
	return &e, nil
}

func (s fakeEarly) TakeAllEarly(ctx context.Context, tx *fakeTx, consumer, aggregateID string) ([]seam.EarlyEvent, error) {
	if err := s.use(ctx, tx, "TakeAllEarly"); err != nil {
		return nil, err
	}
	var out []seam.EarlyEvent
	for k, e := range tx.st.early {
		if k.consumer == consumer && k.aggregate == aggregateID {
			out = append(out, e)
			delete(tx.st.early, k)
		}
	}
	slices.SortFunc(out, func(a, b seam.EarlyEvent) int { return int(a.Version - b.Version) })
	return out, nil
}

func (s fakeEarly) ExpiredEarly(ctx context.Context, consumer string, before time.Time, limit int) ([]string, error) {
	if err := s.db.call(ctx, "ExpiredEarly"); err != nil {
		return nil, err
	}
	var out []string
	err := s.db.inTx(ctx, func(st *fakeState) error {
		for k, e := range st.early {
			if k.consumer == consumer && e.HeldAt.Before(before) && !slices.Contains(out, k.aggregate) {
				out = append(out, k.aggregate)
			}
		}
		slices.Sort(out)
		out = out[:min(len(out), limit)]
		return nil
	})
	return out, err
}

func (s fakeEarly) CountEarly(ctx context.Context, consumer string) (int, error) {
	n := 0
	err := s.db.inTx(ctx, func(st *fakeState) error {
		for k := range st.early {
			if k.consumer == consumer {
				n++
			}
		}
		return nil
	})
	return n, err
}

func (s fakeEarly) Savepoint(ctx context.Context, tx *fakeTx) error {
	if err := s.use(ctx, tx, "Savepoint"); err != nil {
		return err
	}
	tx.save = tx.st.clone()
	return nil
}

func (s fakeEarly) RollbackTo(ctx context.Context, tx *fakeTx) error {
	if err := s.use(ctx, tx, "RollbackTo"); err != nil {
		return err
	}
	if tx.save == nil {
		return errors.New("fake: no savepoint")
	}
	tx.st = tx.save.clone()
	return nil
}

func (s fakeEarly) Release(ctx context.Context, tx *fakeTx) error {
	if err := s.use(ctx, tx, "Release"); err != nil {
		return err
	}
	if tx.save == nil {
		return errors.New("fake: no savepoint")
	}
	tx.save = nil
	return nil
}
