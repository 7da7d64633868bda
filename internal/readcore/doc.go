// Package readcore is a direct reader's decisions as a state machine: no
// goroutines, no clock, no I/O. It is what directread's Reader runs
// underneath, and what the simulation (internal/harness/sim) drives
// directly, so that the decisions the simulation checks are the Reader's
// own.
//
// A Core holds what a reader knows of its partitions: the leader epoch
// lineage learned from the epoch-start markers, the commits (high
// watermarks) of each leader epoch, the entries not yet yielded, and what
// was yielded. The driver reaches it with events: Round begins a round
// of metadata reading, Learn hands it one record read, MetadataRead says
// how far a metadata partition was read, Plan asks it to decide what to
// fetch, Fetched hands back what a fetch returned, and Seek restarts a
// partition after a GoneError or TruncatedError, or moves it anywhere.
// What the events decide is gathered in a Ready, the model being
// etcd-io/raft's RawNode: Ready returns it without changing anything,
// HasReady says whether there is any, and Advance acknowledges it. It
// holds the round begun, the metadata partitions to read again from
// where, and the high watermarks to take before reading (after Round);
// the sections to fetch, up to which offset each may be yielded, and the
// partitions judged gone or truncated (after Plan); and the batches to
// yield, the sections given up, and whether to retry after a backoff
// (after Fetched). Plan says when records are judged gone and why that
// is sound however busy the metadata log is.
//
// The entries held are bounded (Config.MaxHeld): past the bound those
// furthest ahead are forgotten. The Core notes where in each metadata
// partition each partition's entries are (recIndex), so that once a
// partition reaches entries it forgot, or seeks back to records whose
// entries it forgot once yielded, Round asks for the metadata to be read
// again from the first record that may describe them.
//
// Which entries to take is package fencing's decision (fencing.Decide,
// with the yielded log as the local lineage), and how far is the commit's:
// a commit of leader epoch E is trusted for an offset only once the
// lineage there comes from a publication of E or later. directread's
// package documentation says why.
//
// The interaction tests are scripts, testdata/*.txt, in the format of
// github.com/cockroachdb/datadriven, as etcd-io/raft's are: each subtest
// starts a core reading one partition with "new", then plays the driver's
// events a command each (round, learn with the message's markers, entries
// and commits as its input lines, read for MetadataRead, plan, fetched),
// and below each command's "----" is what came of it: for round, plan and
// fetched, the Ready the core hands out afterwards, as DescribeReady
// renders it. The commands are listed on scriptEnv.handle in
// script_test.go. To change a script, edit its commands and run
// "go test ./internal/readcore -run TestScripts -rewrite", which writes
// what the core does now below each command; read the diff before you
// commit it.
package readcore
