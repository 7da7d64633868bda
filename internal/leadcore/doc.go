// Package leadcore is the leader side of activetier's replication as a
// deterministic state machine: which partitions the broker leads and at
// which epoch, the batches buffered for the next combined object, when an
// object is cut and uploaded, in which order each partition's entries are
// published, when an offset becomes durable, when the engine is degraded,
// the epoch markers and republishing a leadership owes its followers,
// what each follower holds and whether it is caught up, republishing for a
// follower that no entry continues, and which objects garbage collection
// may delete.
//
// A Core has no goroutines, locks, channels or clock, and does no I/O. Its
// caller (walstore's leader engine, or a simulation) feeds it events, each with the
// time it happened: the broker's calls (BecomeLeader, Append, Resign,
// Progress, ...), Tick when a WakeAt it asked for has come, and the results
// of the work it handed out. The work comes out of Ready: objects to
// encode and upload, metadata messages to append, local-log reads, deletes,
// retries and cancellations of requests in flight, and what the caller must
// tell its own callers (a durable offset advanced, buffer space freed, the
// health changed). Every request carries an id assigned in order; its
// result comes back as an event with that id. The same events in the same
// order give the same Ready, byte for byte.
//
// Two events carry what the driver read of the broker's log before it fed
// them, as raft's application reads its own state before it calls Step:
// BecomeLeader the log's end offset, which the broker's call waits for
// and whose failure refuses the transition, and Progress the log's
// lineage when NeedLineage says the follower's report is judged against
// it. They are inputs of the call, not work the core asks for: the core
// itself never waits on an answer outside Ready.
//
// The design follows etcd's raft package: the protocol in one state
// machine, a thin driver that performs its I/O with the concurrency it
// wants, and tests that are scripts of events and expected outputs.
//
// The interaction tests are those scripts, testdata/*.txt, in the format of
// github.com/cockroachdb/datadriven: each subtest starts a core with "new"
// (or "new world", whose drain performs every request as an instant store,
// metadata log and local log would), then plays one event a command
// (become-leader, append, advance, encode, stored, published, progress,
// ...), and "ready" shows below its "----" the Ready the core hands out,
// as DescribeReady renders it, with times as offsets from the script's
// clock. A command answering a request takes its id as the output above
// shows it, or a name "ready upload=NAME" gave it. The commands are listed
// on scriptEnv.handle in script_test.go. To change a script, edit its
// commands and run "go test ./internal/leadcore -run TestScripts -rewrite",
// which writes what the core does now below each command; read the diff
// before you commit it.
package leadcore
