package sqsfifo

import "context"

// SetDeleteHook replaces what runs between DeadLetter's copy and its
// delete, and returns a function restoring the original.
func SetDeleteHook(f func(context.Context) error) func() {
	old := deleteHook
	deleteHook = f
	return func() { deleteHook = old }
}
