package storage

import (
	"context"
	"errors"
	"time"

	"github.com/activetier/activetier/metadata"
)

// ObjectStore is the contract the engines (packages walstore and
// directread) are written against: one broker's view of the object store. Writes go to the broker's own AZ's
// bucket; reads and deletes may address any bucket the store was configured
// with. Implementations are safe for concurrent use and return errors that
// match ErrNotFound, ErrAlreadyExists, ErrUnavailable, ErrInvalidRange,
// ErrPermanent or ErrUnknownBucket under errors.Is, wrapped with the bucket
// and key involved.
type ObjectStore interface {
	// Local returns the AZ and bucket Put writes to; Key is empty.
	Local() metadata.ObjectRef
	// Put stores body under key in the local bucket, only if no object has
	// that key (S3's If-None-Match: *). An existing key is never
	// overwritten: Put returns ErrAlreadyExists instead. The store may read
	// body until Put returns, and must neither modify it nor retain it
	// after, whatever Put returns: the engine reuses the buffer for the
	// next object once an upload succeeded and every Put of it has
	// returned (a hedged Put of the same body, under another key, may run
	// alongside). An SDK that may still read the body after a cancelled
	// request returns (a retry in its transport, say) must be given a
	// copy.
	Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error)
	// GetRange returns exactly length bytes of the object ref names,
	// starting at offset. length must be positive; a range that does not lie
	// wholly inside the object is ErrInvalidRange, a missing object
	// ErrNotFound, a bucket the store was not configured with
	// ErrUnknownBucket (checked before any request is made). The returned
	// slice is the caller's: the store neither keeps nor changes it. The
	// engines (and directread) verify it once, then use it in place: a
	// store that changed it afterwards would go undetected, as for
	// RangeReader.
	GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error)
	// Delete removes the objects, batching requests as the backend allows.
	// Deleting a missing object is not an error.
	Delete(ctx context.Context, refs []metadata.ObjectRef) error
	// List returns the objects of bucket whose keys start with prefix, in
	// no particular order (S3 Express directory buckets do not sort).
	List(ctx context.Context, bucket, prefix string) ([]ObjectInfo, error)
}

// RangeReader is an ObjectStore that can read a range into a buffer the
// caller provides. walstore's follower engine uses it, when the store implements
// it, to read sections into buffers it reuses instead of allocating one
// per GET.
//
// The follower verifies each section's checksum when its read returns;
// the batches of a section stored uncompressed then alias dst until they
// are appended, while the section waits for its turn, and the buffer goes
// to another read once they are. So a write into dst after ReadRange
// returned is caught only if it lands before a check, and the follower
// limits where one can land: the buffer of a read that did not succeed
// (an error, such as that of a hedge cancelled or of a fetch that ran
// out of time; a short count; a panic) is never handed to another read,
// but left to the garbage collector, so a request the store abandoned
// and left writing cannot reach a section verified since.
//
// What remains undetectable is a store that writes into dst after a
// ReadRange that returned it whole and without error (say, one that
// races two requests of its own into dst and returns when the first
// completes), when the write lands after the follower verified a section
// in dst and before LocalLog.Append has taken its bytes: those bytes are
// appended. Closing that window takes a copy of every byte the store
// wrote into memory it never sees, or narrowing it a second checksum
// pass over every uncompressed byte right before the append (which
// still leaves the append itself): in BenchmarkReplication each cost
// some 14% (the copy) and 15% (the second pass) more CPU per replicated
// byte (cpu-ns/B). A contract every store we ship keeps does not
// justify that: memstore, fsstore, s3express and gcsstore never write
// to dst once ReadRange has returned, and the conformance suite
// (storagetest's ReadRangeNotRetained and ReadRangeAbandoned) checks
// that of any store. A compressed section is decompressed into memory
// only the engine writes, right after its check, which leaves a late
// write no more than that instant.
type RangeReader interface {
	// ReadRange reads len(dst) bytes of the object ref names, starting at
	// offset, into dst, and returns how many it read: len(dst), or fewer
	// with an error saying why. Its errors are GetRange's for the range
	// [offset, offset+len(dst)). The store must not retain dst, nor write
	// to it, after ReadRange returns, whatever it returns: the caller
	// reuses dst for the next read at once after a read that succeeded,
	// and a write that comes later puts wrong bytes into a section that
	// may already be verified (see above).
	ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error)
}

// ObjectInfo describes a stored object, as returned by ObjectStore.List.
type ObjectInfo struct {
	Ref          metadata.ObjectRef
	Size         int64
	LastModified time.Time
}

// Errors of the ObjectStore contract, to be tested with errors.Is. Their
// messages keep the "walstore:" prefix they had before the contract had a
// package of its own, since logs and alerts already match on them.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("walstore: object not found")
	// ErrAlreadyExists: a conditional Put found the key taken.
	ErrAlreadyExists = errors.New("walstore: object already exists")
	// ErrUnavailable: a transient failure (throttling, 5xx, timeout, the
	// bucket or its AZ unreachable). The same request may succeed later.
	ErrUnavailable = errors.New("walstore: object store unavailable")
	// ErrInvalidRange: a byte range that is empty, negative, or not wholly
	// inside the object.
	ErrInvalidRange = errors.New("walstore: invalid byte range")
	// ErrUnknownBucket: a reference to a bucket the store was not
	// configured with. No request is made for it.
	ErrUnknownBucket = errors.New("walstore: bucket not configured")
	// ErrPermanent: the object store refused the request in a way that
	// retrying will not change: access denied, a missing bucket, an
	// operation the server does not implement (HTTP 501), a request it
	// calls malformed. An operator must act; the error names the bucket
	// and the server's own code. Retrying is harmless but futile, so a
	// caller that retries anyway should report it (as walstore's Health
	// does) rather than
	// wait for a timeout to say that something is wrong.
	ErrPermanent = errors.New("walstore: object store refused the request permanently")
)
