//go:build !unix

package nodeproc

import (
	"errors"
	"os"
	"time"
)

// lockFile takes an exclusive lock on path by creating it, waiting while
// another process holds it.
func lockFile(path string) (func(), error) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, errors.New("timed out waiting for " + path)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
