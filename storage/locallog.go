package storage

import (
	"context"
	"errors"

	"github.com/activetier/activetier/metadata"
)

// LocalLog is the broker's own log, the only part of the broker the engines
// (package walstore) touch. The follower appends fetched batches to it and truncates it on
// divergence; the leader reads it to republish after a failover. A Kafka
// broker implements it over its partitions' UnifiedLog and leader-epoch
// cache. Package storagetest's RunLocalLog checks an implementation
// against the contract below.
//
// Each partition's log is a run of whole batches covering offsets
// [start, end) without gaps, plus the leader-epoch entries of those
// records. A partition the log has not seen yet is empty at offset 0. The
// epoch entries are ascending in both epoch and start offset; an entry
// (epoch, start) says that the records from start up to the next entry's
// start carry that epoch. Partitions are independent of each other.
//
// Implementations are safe for concurrent use, on one partition and
// across partitions; each call is atomic: a call that returns an error
// changes nothing. Everything a call returned or accepted must survive a
// restart of the broker (a clean shutdown and reopen): the follower
// rebuilds its fencing state from EndOffset and Epochs. The context of
// Append, Truncate and Read bounds calls that may block; an implementation
// that observes its cancellation returns an error matching ctx.Err() and
// changes nothing, one that does not block may ignore it. The context may
// outlive the call (the follower shares one deadline among calls made in
// quick succession), so an implementation must not leave work behind
// that waits for it to end. EndOffset and Epochs take no context: they
// should answer from what the log keeps in memory (Kafka's log end offset
// and leader-epoch cache), since the engines call them inside role
// changes, on the follower engine's one goroutine and when they judge a
// follower's progress.
//
// A call that hangs, with or without a context, costs its partition only.
// The engines make each call on a goroutine of its own and wait for it as
// long as the caller's context allows (a transition's), or the engine's
// bound (walstore.NodeConfig.LocalTimeout for the follower engine,
// walstore.NodeConfig.RequestTimeout for the leader engine and
// RecordProgress), holding no lock of other partitions meanwhile; one
// that outlasts it fails with a *walstore.DependencyError naming the call (e.g.
// "LocalLog.EndOffset") that matches ErrUnavailable and, for a
// transition, its context's error. The call is left running, and until
// it returns the partition's other calls, and its transitions, fail at
// once with such an error rather than pile up behind it: at most one
// call per partition is ever left running. The partition, if the Node
// leads or follows it, is reported failing meanwhile (walstore's
// Health.Partitions; one it has no role for, say a first BecomeLeader
// whose EndOffset hung, only refuses its transitions), and works again
// once the call returns; what a call that was given up on returns is dropped, and the
// follower engine reads the partition's state from the log again.
type LocalLog interface {
	// EndOffset returns the offset the next record of tp will get.
	EndOffset(tp metadata.TopicPartition) (int64, error)
	// Epochs returns the leader-epoch entries of tp, ascending, as Kafka's
	// leader-epoch checkpoint stores them. The caller may modify the slice.
	Epochs(tp metadata.TopicPartition) ([]EpochEntry, error)
	// Append adds batches to the end of tp's log, all or none. The first
	// batch must start exactly at EndOffset and each next one right after
	// the one before (FirstOffset = previous LastOffset + 1); no batch's
	// epoch may be below the epoch of the batch before it or the log's
	// latest epoch entry. Otherwise Append returns an error wrapping
	// ErrNotContiguous. A batch whose LastOffset is below its FirstOffset
	// or whose epoch is negative is ErrInvalidBatch. A batch whose epoch
	// is above the latest entry's starts a new entry at its FirstOffset.
	// Appending no batches does nothing. The log may read the batches'
	// Data until Append returns, and must neither modify it nor retain it
	// after: the engine reuses that memory for other sections as soon as
	// Append returns (whatever it returns), so a log that writes
	// asynchronously copies what it needs first.
	Append(ctx context.Context, tp metadata.TopicPartition, batches []Batch) error
	// Truncate removes tp's records at and after offset, and the epoch
	// entries that start there or later. Afterwards EndOffset is offset,
	// except on a log whose records all lie below offset, which is left as
	// it was. So truncating a log that holds no records starts it over at
	// offset (Kafka's truncateFullyAndStartAt: how a new replica begins at
	// the leader's earliest offset), and truncating at or below the first
	// record it holds empties it. An offset inside a batch (above its
	// FirstOffset, at or below its LastOffset) is ErrNotBatchBoundary, a
	// negative one ErrInvalidOffset.
	Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error
	// Read returns consecutive whole batches of tp, exactly as appended,
	// starting with the one that holds offset from, or with the first
	// batch the log holds if from is below it. It returns at least one
	// batch if from is below EndOffset, and more only while their Data
	// add up to at most maxBytes; it may return fewer than fit. At or
	// after EndOffset it returns no batches and no error. The caller may
	// modify what Read returns.
	Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]Batch, error)
}

// Errors of the LocalLog contract, to be tested with errors.Is. Their
// messages keep their "walstore:" prefix, as those of ObjectStore do.
var (
	// ErrNotContiguous: batches given to LocalLog.Append do not continue
	// the log: the first does not start at its end offset, one does not
	// start right after the one before, or an epoch goes backwards.
	ErrNotContiguous = errors.New("walstore: batches do not continue the local log")
	// ErrNotBatchBoundary: LocalLog.Truncate at an offset inside a batch.
	// Batches are the unit of replication; a log never splits one.
	ErrNotBatchBoundary = errors.New("walstore: offset inside a batch")
	// ErrInvalidOffset: LocalLog.Truncate at a negative offset.
	ErrInvalidOffset = errors.New("walstore: invalid offset")
	// ErrInvalidBatch: a batch that cannot be part of a partition's log:
	// an inverted or negative offset range or a negative epoch.
	// walstore's Node.Append returns it too, for a batch
	// with no data, an epoch other than the leadership's, or a first
	// offset that does not continue the batches appended before it.
	ErrInvalidBatch = errors.New("walstore: invalid batch")
)
