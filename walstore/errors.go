package walstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/activetier/activetier/storage"
)

// ErrContractViolation matches errors for answers a dependency (the object
// store, the metadata log, the broker's local log) gave that its interface
// does not allow: a short read, a negative offset, batches that do not
// continue each other. The engines never trust such an answer; the error
// names the dependency and the call (see DependencyError).
var ErrContractViolation = errors.New("walstore: dependency broke its contract")

// DependencyError is an error returned by, or found in the answer of, one
// of the interfaces the engines are built on. Dependency names the call,
// e.g. "LocalLog.Append" or "ObjectStore.GetRange"; Err is what it
// returned, or an error matching ErrContractViolation that says what was
// wrong with its answer.
type DependencyError struct {
	Dependency string
	Err        error
}

func (e *DependencyError) Error() string { return fmt.Sprintf("%s: %v", e.Dependency, e.Err) }

func (e *DependencyError) Unwrap() error { return e.Err }

// contractViolation is the error for an answer of call dependency that
// breaks its contract, as detail says.
func contractViolation(dependency, detail string) error {
	return &DependencyError{Dependency: dependency, Err: fmt.Errorf("%w: %s", ErrContractViolation, detail)}
}

// noAnswerError is a dependency call that did not answer in time. It
// matches storage.ErrUnavailable, since the same call may succeed later, but says
// so in its own words: storage.ErrUnavailable's name the object store, and the
// call may be the metadata log's.
type noAnswerError struct {
	d      time.Duration
	within bool  // d is the attempt's bound, RequestTimeout; otherwise how long the call has run
	err    error // what the call returned when given up, if it returned; or the context's error that gave up on it
}

func (e *noAnswerError) Error() string {
	switch {
	case e.within:
		return fmt.Sprintf("no answer within %v (%v)", e.d, e.err)
	case e.err != nil:
		// The caller gave up: its context ended.
		return fmt.Sprintf("no answer after %v: %v", e.d, e.err)
	}
	return fmt.Sprintf("no answer for %v", e.d)
}

// Is makes errors.Is(err, storage.ErrUnavailable) true.
func (e *noAnswerError) Is(target error) bool { return target == storage.ErrUnavailable }

// Unwrap returns what the call returned when given up, or nil.
func (e *noAnswerError) Unwrap() error { return e.err }
