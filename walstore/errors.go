package walstore

import (
	"errors"
	"fmt"
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
