// Package followcore is the follower side of activetier's replication
// protocol as a state machine: no goroutines, no clock, no I/O, randomness
// only from a seed. It is what walstore's Follower runs underneath, and
// what the simulation drives directly.
//
// The broker and the world reach the core as events, each a method taking
// the current time: Follow and Unfollow (role changes), Records (metadata
// read from the broker's metadata partition), Fetched (the outcome of a
// fetch round), Loaded, Appended and Truncated (the local log's answers)
// and Tick (time passing). Each event ends with a step that does all the
// work the core's state then allows, and gathers what the core wants done
// in a Ready: local-log loads, truncations and appends, fetch rounds and
// their cancellations, a request to read the metadata again from its
// start, the progress to report to leaders, the appends made and lags
// changed, and the time at which it wants a Tick. The hand-off is
// etcd-io/raft's RawNode's: Ready returns what was gathered since the last
// Advance without changing anything (two calls give the same Ready),
// HasReady says whether there is anything new (requests, news, or a WakeAt
// other than the one last acknowledged), and Advance acknowledges the
// Ready, whose requests are then the driver's to perform. A driver's loop
// is thin: take the Ready, Advance, perform it, feeding the answers back
// as events. Every request carries an id; its answer comes back as an
// event with that id. A Ready's slices stay valid until the Advance after
// its own, which reuses their arrays.
//
// The same events in the same order give the same Ready, byte for byte:
// the core iterates only over slices in an order its events fix, and its
// backoff jitter comes from a PCG seeded by Config.Seed.
//
// What the core decides for each entry is package fencing's decision
// (apply, skip, drop, hold, truncate); the rest is bookkeeping: which
// entries are held, which to fetch next and from which bucket, when to
// retry, when a partition whose local log failed may start again.
//
// One partition has at most one local-log request outstanding: the core
// does not decide anything for a partition while its log is busy, so a
// driver that executes requests one after another sees the same decisions
// as one that answers them later.
//
// The interaction tests are scripts, testdata/*.txt, in the format of
// github.com/cockroachdb/datadriven, as etcd-io/raft's are: each subtest
// starts a core with "new", then plays one event a command (follow,
// loaded, records, fetched, appended, truncated, tick, ...) with the time
// in milliseconds as at= and the id of the request it answers as id=, and
// below each command's "----" is the Ready the core hands out afterwards,
// as DescribeReady renders it (taken with Ready and Advance, the
// hand-off checked on the way), or what an inspection (stats, releases,
// latency) shows. The commands are listed on scriptEnv.handle in
// harness_test.go. To change a script, edit its commands and run
// "go test ./internal/followcore -run TestScripts -rewrite", which writes
// what the core does now below each command; read the diff before you
// commit it.
package followcore
