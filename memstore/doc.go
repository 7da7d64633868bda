// Package memstore is activetier's in-memory backend: a storage.ObjectStore
// per broker over a Cluster of per-AZ buckets, a metadata.Log, and a
// LocalLog standing in for a broker's own log (batches and leader-epoch
// cache, implementing storage.LocalLog). It is the
// default for tests, examples and the demo, so it aims to behave like the
// real services where the engines could notice a difference, and to make
// the failures the engines must survive easy to stage.
//
// # Guarantees
//
// Stores pass the storagetest conformance suite: Put is if-absent and
// atomic, bodies and results are copies, refs to buckets outside the
// cluster are ErrUnknownBucket before any request is made or counted. The
// Log passes the metadatatest suite: values are copied in and out, reads
// long-poll without a goroutine per reader, Close wakes them with
// metadata.ErrClosed.
//
// Everything random the cluster decides — latencies and List order —
// comes from one PCG source seeded by ClusterConfig.Seed, and every wait
// goes through the injected Clock; the injectors of package faults that
// decide fault rates and corrupted bytes are seeded on their own. On a
// simulated clock, with the seeds and the order of requests the same, a
// run replays exactly.
//
// # What it models
//
//   - Latency: per-request lognormal distributions with a size-dependent
//     median, plus a cross-AZ round trip when a store reads another AZ's
//     bucket. Profiles "s3express" and "s3standard" carry the latency fits
//     of docs/design.md, "Reference prices and latencies"; the zero
//     Profile, "none", waits for
//     nothing.
//   - S3's request shapes: a Delete is one request per bucket and per 1000
//     keys, a List one per 1000 objects listed. List order is a seeded
//     shuffle: S3 Express directory buckets do not sort, so no caller may
//     depend on an order.
//   - Faults (Cluster.AddFault): a faults.Injector consulted once per
//     request, as S3 would see it (a Delete of 2500 keys in one bucket is
//     three requests): errors by predicate and rate, errors after the
//     request took effect (a lost response: the retried Put then finds its
//     key taken), slowdowns added to the request's latency, and GETs
//     returning one corrupted byte. faults.WrapStore, which sees calls
//     rather than requests, serves stores that have no requests of their
//     own to show.
//   - Outages (Cluster.SetOutage): a whole AZ's bucket unreachable, failing
//     requests already in flight as well as new ones, then coming back with
//     its objects intact.
//   - Accounting (Cluster.Stats, Log.Stats): requests by kind, bytes up and
//     down, failures and cross-AZ traffic per bucket — the inputs of a
//     bill, read by the demo's cost report.
//
// # What it does not model
//
// Throughput limits and throttling under load (inject them as faults),
// partial writes (a Put is all or nothing), eventual consistency (S3 is
// strongly consistent for these operations), storage limits, object
// metadata, and the brokers of a failed AZ: an outage takes the bucket
// away, and the caller decides what happens to the brokers there.
package memstore
