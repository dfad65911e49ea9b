package outbox

import (
	"context"
	"time"
)

// SetPause replaces how r waits between attempts to stream (before Run).
func SetPause(r *Relay, pause func(ctx context.Context, d time.Duration) bool) { r.pause = pause }
