// Package storagetest holds the conformance suites for storage.ObjectStore
// (Run), for wrappers of one (RunWrapper) and for storage.LocalLog
// (RunLocalLog).
//
// # ObjectStore
//
// Every ObjectStore implementation proves it keeps the contract the engines
// rely on by calling Run from one of its tests, with a Harness that builds
// fresh stores for each subtest:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, storagetest.HarnessFunc(
//			func(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore) {
//				// two brokers' views of one deployment, in different AZs
//			}))
//	}
//
// The contract has one bucket per AZ: Put writes the store's own bucket,
// while GetRange, Delete and List address any configured bucket. So the
// harness returns two stores of one deployment in different AZs, each
// configured with both buckets, and the suite checks that each can read,
// list and delete what the other wrote.
//
// The suite is written to run against real servers as well as in-memory
// fakes. Buckets may persist between runs and hold other objects: every key
// the suite writes lives under a prefix unique to the run and the subtest,
// List assertions only look at that prefix, and each subtest deletes what it
// wrote when it ends. For slow backends, ManyKeys shrinks or skips the cases
// that need more than 1000 objects (S3's page and batch size).
//
// Contract details the interface comment leaves implicit, and that the suite
// therefore pins down:
//   - A zero-length body is a valid object: Put stores it, List reports it
//     with size 0, and every GetRange of it is ErrInvalidRange, since no
//     positive-length range lies inside it.
//   - Range arguments that could never be valid (negative offset,
//     non-positive length, offset+length overflowing int64) are
//     ErrInvalidRange whether or not the object exists.
//   - Delete and List report ErrUnknownBucket like GetRange does, and Delete
//     checks every reference before deleting anything.
//   - A method called with an already cancelled context returns an error
//     matching context.Canceled and changes nothing: a Put so refused stores
//     nothing, a Delete deletes nothing.
//   - ErrNotFound and ErrAlreadyExists errors name the key involved.
//   - A store that implements storage.RangeReader reads exactly what
//     GetRange returns for the same range, and fails where GetRange fails,
//     with errors matching the same sentinels (a zero-length dst is
//     ErrInvalidRange). It returns n <= len(dst), fewer only with an
//     error; it writes nothing past len(dst), though dst has spare
//     capacity, as the engine's pooled buffers do; and it writes nothing
//     into dst once it has returned, even when ctx ended mid-read.
//
// # Wrappers
//
// A store wrapper (middleware that takes a storage.ObjectStore and
// returns one forwarding to it: a meter, a fault injector, a cache) calls
// RunWrapper with the harness of a store it can wrap and its wrapping
// function:
//
//	func TestWrapperConformance(t *testing.T) {
//		storagetest.RunWrapper(t, harness, func(s storage.ObjectStore) storage.ObjectStore {
//			return meter.Store(s)
//		})
//	}
//
// Besides Run's suite through the wrapped stores, it checks that the
// wrapper keeps the optional interfaces of what it wraps
// (OptionalInterfaces, today storage.RangeReader): the wrapped store
// implements each exactly when the store it wraps does. A wrapper that
// embeds storage.ObjectStore, the obvious way to write one, drops them,
// and the engines then quietly do without (a follower allocates a buffer
// per GET instead of reusing pooled ones). The usual way to keep one is
// a second type, returned when the wrapped store has the interface:
//
//	func Wrap(s storage.ObjectStore) storage.ObjectStore {
//		w := &wrapper{s: s}
//		if rr, ok := s.(storage.RangeReader); ok {
//			return &rangeWrapper{wrapper: w, rr: rr} // ReadRange forwards to rr
//		}
//		return w
//	}
//
// # LocalLog
//
// A broker proves its own log keeps the storage.LocalLog contract by
// calling RunLocalLog with a LocalLogHarness that makes a fresh log per
// subtest and reopens it as a restarted broker would:
//
//	func TestLocalLogConformance(t *testing.T) {
//		storagetest.RunLocalLog(t, storagetest.LocalLogHarness{
//			New: func(ctx context.Context, t *testing.T) storage.LocalLog {
//				return openLog(t, t.TempDir())
//			},
//			Reopen: func(ctx context.Context, t *testing.T, l storage.LocalLog) storage.LocalLog {
//				dir := l.(*brokerLog).Dir()
//				require.NoError(t, l.(*brokerLog).Close())
//				return openLog(t, dir)
//			},
//		})
//	}
//
// The subtests cover appends (only at the end offset, all or nothing,
// ErrNotContiguous and ErrInvalidBatch for what does not continue the log),
// reads (whole batches byte for byte, from inside a batch, maxBytes, at
// and past the end, below the first record), epochs (recorded on append,
// cut by truncation), truncation (at batch boundaries, ErrNotBatchBoundary
// inside one, past the end, to and below the first record, starting an
// empty log over at an offset), independent partitions, concurrent use
// (run it with -race), cancelled contexts, and what survives a reopen.
// Logs that keep nothing across a restart, like memstore's, set
// InMemoryOnly instead of Reopen; the suite then leaves the reopen cases
// out. The suite writes to partitions of the topics "storagetest-a",
// "storagetest-b" and "storagetest-concurrent", which the log must treat
// as partitions it hosts, empty until written. A log that parses the
// batches it stores sets MakeBatch to produce batches in its format.
package storagetest
