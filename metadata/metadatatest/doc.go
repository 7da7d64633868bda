// Package metadatatest is the conformance suite every [metadata.Log]
// implementation runs, so that the engines written against the interface
// behave the same on the in-memory log, on a Kafka topic, or on anything a
// user brings.
//
// The engines lean on a handful of properties that the interface comment
// states and that are easy to get subtly wrong in an implementation: offsets
// are dense per partition, a record is stored exactly once even under
// concurrent appenders, the caller's buffer is copied, trimming is
// monotonic, a long-polling reader wakes when data arrives, and a closed log
// says so with [metadata.ErrClosed]. The suite checks each of those as a
// subtest named after the property, so a failing implementation learns which
// promise it broke.
//
// # Wiring an implementation in
//
// An implementation calls [Run] from one test in its own package, passing a
// constructor for a fresh, empty log with the requested number of
// partitions. The suite owns every log it creates and closes it at the end of
// each subtest; the constructor registers any further cleanup (servers,
// temporary directories) with t.Cleanup:
//
//	func TestLogConformance(t *testing.T) {
//		metadatatest.Run(t, func(t *testing.T, partitions int32) metadata.Log {
//			log, err := memstore.NewLog(partitions)
//			require.NoError(t, err)
//			return log
//		})
//	}
//
// # What the suite expects beyond the interface comment
//
//   - A context that is already cancelled makes every method that takes one
//     return an error matching context.Canceled (implementations check
//     ctx.Err() on entry; callers rely on it to stop promptly).
//   - Close wakes a Read that is waiting for data, which then returns
//     [metadata.ErrClosed]; a second Close also returns ErrClosed.
//   - Read at the high watermark may wait. The suite accepts both outcomes the
//     interface allows: an empty slice with a nil error, or, once the
//     caller's context expires, an error matching that context's error.
//   - Read may return fewer than max records; the suite reads in a loop.
//
// Subtests that wait use timeouts of a few seconds at most, and no subtest
// asserts on timing.
package metadatatest
