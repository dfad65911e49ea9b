package postgres

import "github.com/wary-go/wary/idem/internal/sqlcore"

// Classify is classify, for the tests.
var Classify = classify

// OutboxChannel is the store's notification channel, for the tests.
func OutboxChannel(s *Store) string { return s.outbox.Channel() }

// NoWake makes s's adding transactions run no wake-up statement at all
// (no advisory lock, no flag, no NOTIFY), for the benchmarks.
func NoWake(s *Store) { s.outbox = sqlcore.NewOutbox(s.core, sqlcore.OutboxDialect{SkipLocked: true}) }

// WakeKey is the advisory lock key of s's wake flags.
func WakeKey(s *Store) int64 { return s.outbox.WakeKey() }
