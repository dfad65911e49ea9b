package mysql_test

import (
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// quiet is the stores' logger in tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
