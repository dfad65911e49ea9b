package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/wary-go/wary/idem/store"
)

// Begin implements [store.Store].
func (s *Store) Begin(ctx context.Context) (*sql.Tx, error) {
	return s.core.Begin(ctx)
}

// Commit implements [store.Store].
func (s *Store) Commit(ctx context.Context, tx *sql.Tx) error {
	return s.core.Commit(ctx, tx)
}

// Rollback implements [store.Store].
func (s *Store) Rollback(ctx context.Context, tx *sql.Tx) error {
	return s.core.Rollback(ctx, tx)
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, tx *sql.Tx, consumer, messageID string, at time.Time) (bool, error) {
	return s.core.Claim(ctx, tx, consumer, messageID, at)
}

// ClaimCheck implements [store.ClaimChecker].
func (s *Store) ClaimCheck(ctx context.Context, tx *sql.Tx, consumer, messageID, aggregateID string, at time.Time) (claimed, held bool, err error) {
	return s.core.ClaimCheck(ctx, tx, consumer, messageID, aggregateID, at)
}

// ClaimMany implements [store.ClaimManyer].
func (s *Store) ClaimMany(ctx context.Context, tx *sql.Tx, consumer string, ids []string, at time.Time) (map[string]bool, error) {
	return s.core.ClaimMany(ctx, tx, consumer, ids, at)
}

// Purge implements [store.Store].
func (s *Store) Purge(ctx context.Context, consumer string, before time.Time, limit int) (int, error) {
	return s.core.Purge(ctx, consumer, before, limit)
}

// RecordFailure implements [store.Store].
func (s *Store) RecordFailure(ctx context.Context, consumer, messageID, reason string, at time.Time) (int, time.Time, error) {
	return s.core.RecordFailure(ctx, consumer, messageID, reason, at)
}

// ClearFailure implements [store.Store].
func (s *Store) ClearFailure(ctx context.Context, tx *sql.Tx, consumer, messageID string) error {
	return s.core.ClearFailure(ctx, tx, consumer, messageID)
}

// HasParked implements [store.Store].
func (s *Store) HasParked(ctx context.Context, tx *sql.Tx, consumer, aggregateID string) (bool, error) {
	return s.core.HasParked(ctx, tx, consumer, aggregateID)
}

// Park implements [store.Store].
func (s *Store) Park(ctx context.Context, tx *sql.Tx, p *store.Parked) error {
	return s.core.Park(ctx, tx, p)
}

// ListParked implements [store.Store].
func (s *Store) ListParked(ctx context.Context, consumer string, f store.ParkedFilter) ([]store.Parked, error) {
	return s.core.ListParked(ctx, consumer, f)
}

// CountParked implements [store.Store].
func (s *Store) CountParked(ctx context.Context, consumer string, f store.ParkedFilter) (int, error) {
	return s.core.CountParked(ctx, consumer, f)
}

// DeleteParked implements [store.Store].
func (s *Store) DeleteParked(ctx context.Context, tx *sql.Tx, consumer string, id int64) (bool, error) {
	return s.core.DeleteParked(ctx, tx, consumer, id)
}

// UpdateParked implements [store.Store].
func (s *Store) UpdateParked(ctx context.Context, consumer string, id int64, reason string, at time.Time) error {
	return s.core.UpdateParked(ctx, consumer, id, reason, at)
}

// DiscardParked implements [store.Store].
func (s *Store) DiscardParked(ctx context.Context, consumer string, f store.ParkedFilter) (int, error) {
	return s.core.DiscardParked(ctx, consumer, f)
}

// StageKey implements [store.KeyStore].
func (s *Store) StageKey(ctx context.Context, tx *sql.Tx, provider, key string, intent []byte, at time.Time) (store.KeyRecord, bool, error) {
	return s.outbox.StageKey(ctx, tx, provider, key, intent, at)
}

// GetKey implements [store.KeyStore].
func (s *Store) GetKey(ctx context.Context, provider, key string) (rec store.KeyRecord, ok bool, err error) {
	return s.outbox.GetKey(ctx, provider, key)
}

// StartKeyCall implements [store.KeyStore].
func (s *Store) StartKeyCall(ctx context.Context, provider, key string, attempts int, at, leaseUntil time.Time) (bool, error) {
	return s.outbox.StartKeyCall(ctx, provider, key, attempts, at, leaseUntil)
}

// FinishKeyCall implements [store.KeyStore].
func (s *Store) FinishKeyCall(ctx context.Context, provider, key string, attempts int, out store.KeyOutcome, at time.Time) (bool, error) {
	return s.outbox.FinishKeyCall(ctx, provider, key, attempts, out, at)
}

// ListKeys implements [store.KeyStore].
func (s *Store) ListKeys(ctx context.Context, f store.KeyFilter) ([]store.KeyRecord, error) {
	return s.outbox.ListKeys(ctx, f)
}

// PurgeKeys implements [store.KeyStore].
func (s *Store) PurgeKeys(ctx context.Context, provider string, before time.Time, limit int) (int, error) {
	return s.outbox.PurgeKeys(ctx, provider, before, limit)
}

// AddOutbox implements [store.OutboxStore].
func (s *Store) AddOutbox(ctx context.Context, tx *sql.Tx, msgs []store.OutboxMessage, at time.Time) ([]int64, error) {
	return s.outbox.AddOutbox(ctx, tx, msgs, at)
}

// ClaimOutbox implements [store.RelayStore].
func (s *Store) ClaimOutbox(ctx context.Context, r store.OutboxClaim) (store.OutboxBatch, error) {
	return s.outbox.ClaimOutbox(ctx, r)
}

// ReleaseOutbox implements [store.RelayStore].
func (s *Store) ReleaseOutbox(ctx context.Context, owner string) error {
	return s.outbox.ReleaseOutbox(ctx, owner)
}

// OutboxHealth implements [store.RelayStore].
func (s *Store) OutboxHealth(ctx context.Context, now time.Time) (store.OutboxHealth, error) {
	return s.outbox.OutboxHealth(ctx, now)
}

// ListOutbox implements [store.RelayStore].
func (s *Store) ListOutbox(ctx context.Context, f store.OutboxFilter) ([]store.OutboxRow, error) {
	return s.outbox.ListOutbox(ctx, f)
}

// SetOutboxState implements [store.RelayStore].
func (s *Store) SetOutboxState(ctx context.Context, rowID int64, to store.OutboxState, at time.Time, from ...store.OutboxState) (bool, error) {
	return s.outbox.SetOutboxState(ctx, rowID, to, at, from...)
}

// PurgeOutbox implements [store.RelayStore].
func (s *Store) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	return s.outbox.PurgeOutbox(ctx, before, limit)
}

// CheckVersion implements [store.Store].
func (s *Store) CheckVersion(ctx context.Context, tx *sql.Tx, t store.VersionTable, id string, version int64) (store.VersionCheck, error) {
	return s.core.CheckVersion(ctx, tx, t, id, version)
}

// Transition implements [store.Store].
func (s *Store) Transition(ctx context.Context, tx *sql.Tx, t store.StateTable, id, to string, from ...string) (store.TransitionCheck, error) {
	return s.core.Transition(ctx, tx, t, id, to, from...)
}
