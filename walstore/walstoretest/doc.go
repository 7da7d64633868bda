// Package walstoretest is the conformance suite for walstore.ObjectStore.
//
// Every ObjectStore implementation proves it keeps the contract the engines
// rely on by calling Run from one of its tests, with a Harness that builds
// fresh stores for each subtest:
//
//	func TestConformance(t *testing.T) {
//		walstoretest.Run(t, walstoretest.HarnessFunc(
//			func(ctx context.Context, t *testing.T) (local, peer walstore.ObjectStore) {
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
package walstoretest
