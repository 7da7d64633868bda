package directread

import (
	"errors"
	"fmt"

	"github.com/activetier/activetier/metadata"
)

// Errors to test with errors.Is.
var (
	// ErrGone is matched by a *GoneError: the records at a partition's
	// next offset cannot be read from object storage any more.
	ErrGone = errors.New("directread: records gone from object storage")
	// ErrTruncated is matched by a *TruncatedError: records already
	// yielded are not in the partition's log as a later leader has it.
	ErrTruncated = errors.New("directread: yielded records were truncated")
	// ErrClosed is returned by Poll after Close.
	ErrClosed = errors.New("directread: reader closed")
	// ErrNoStore matches the cause of a GoneError for an object in an AZ
	// the Reader was given no store for.
	ErrNoStore = errors.New("directread: no object store for the object's AZ")
)

// GoneError says that a partition's records from Offset on cannot be read
// from object storage: their objects were deleted (garbage collected once
// every follower applied them, or past the tiered mark), kept failing
// verification for 30 seconds (a single corrupted read is retried), or
// the retained metadata no longer describes them. The
// caller reads [Offset, ResumeHint) from the broker or from tiered
// storage, then calls Seek(Partition, ResumeHint); the Reader has paused
// the partition until then and never skips the offsets in between.
type GoneError struct {
	Partition metadata.TopicPartition
	// Offset is the first offset the Reader cannot serve.
	Offset int64
	// ResumeHint is the first offset after Offset that the Reader knows
	// it can describe, or Offset itself when it knows none: read up to
	// it elsewhere.
	ResumeHint int64
	// Cause is why, when there is more to say than that nothing retained
	// describes the offset: the store's error, or a verification failure.
	Cause error
}

// Error names the partition, the offset gone and where to resume.
func (e *GoneError) Error() string {
	s := fmt.Sprintf("directread: %s offset %d is gone from object storage; read from the broker or tiered storage up to offset %d, then resume there", e.Partition, e.Offset, e.ResumeHint)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns ErrGone and the cause.
func (e *GoneError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrGone}
	}
	return []error{ErrGone, e.Cause}
}

// TruncatedError says that records yielded from Offset on are not the
// partition's records as the leader lineage now has them: a failover
// truncated them. It happens only with Config.Durable; the partition is
// paused until Seek.
type TruncatedError struct {
	Partition metadata.TopicPartition
	// Offset is the first yielded offset that was truncated: consume
	// again from there (Seek).
	Offset int64
}

// Error names the partition and the offset to seek back to.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("directread: %s records yielded from offset %d were truncated by a later leader; seek back to %d", e.Partition, e.Offset, e.Offset)
}

// Unwrap returns ErrTruncated.
func (e *TruncatedError) Unwrap() error { return ErrTruncated }
