package seam

import (
	"errors"
	"testing"

	"github.com/wary-go/wary/broker"
)

func TestDriver(t *testing.T) {
	impl := &struct{ n int }{n: 7}
	if got := NewDriver[string](impl).Impl(); got != impl {
		t.Errorf("Impl: %v, want the value given to NewDriver", got)
	}
	if got := (Driver[string]{}).Impl(); got != nil {
		t.Errorf("zero Driver's Impl: %v, want nil", got)
	}
}

func TestDataError(t *testing.T) {
	if DataError(nil) != nil {
		t.Error("DataError(nil) is not nil")
	}
	cause := errors.New("invalid byte sequence for encoding UTF8")
	err := DataError(cause)
	if !errors.Is(err, ErrData) || !errors.Is(err, cause) || !broker.IsPermanent(err) {
		t.Errorf("DataError: %v: want ErrData, the cause and broker.Permanent", err)
	}
	if again := DataError(err); again != err {
		t.Errorf("DataError of a data error wraps it again: %v", again)
	}
}
