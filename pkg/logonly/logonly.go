// Package logonly keeps out of a source's errors what must not reach API readers, yet belongs in the log: bytes of
// a kubelet's or Prometheus' response, or a panic's value and stack. A source's error becomes storage's 503 text,
// which everyone with view on a namespace reads (DESIGN.md section 3); its log line is the operator's.
package logonly

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Error is Err, whose text is all that Error returns, plus key/value pairs for the log line only.
type Error struct {
	Err error
	KV  []any // klog key/value pairs
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Wrap attaches log-only key/value pairs to err, whose text stays as it is.
func Wrap(err error, kv ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err, KV: kv}
}

// KV returns the log-only pairs of the first Error in err's tree, to append to a klog call's pairs.
func KV(err error) []any {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.KV
	}
	return nil
}

// ErrPanic is wrapped by the errors Recovered makes.
var ErrPanic = errors.New("panic")

// Recovered turns r, recovered from a panic while doing what, into an error that loses only that work. Call it in
// the deferred function that recovered, so that the stack it logs is the panic's.
func Recovered(r any, what string) error {
	return Wrap(fmt.Errorf("%s: %w (a bug: the log has its stack)", what, ErrPanic),
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}
