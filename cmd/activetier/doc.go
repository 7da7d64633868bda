// Command activetier shows active-segment tiering at work and the numbers
// behind it: a simulated multi-AZ cluster replicating through object
// storage (demo), the same cluster over a grid of sizes and rates (bench),
// a combined-object inspector (inspect), and the cost model (cost).
// docs/commands.md in the repository is the overview, with example output.
//
// Usage:
//
//	activetier <subcommand> [flags]
//
// Every subcommand takes --help. Exit codes: 0 success; 1 the run failed
// (a corrupt object, followers that did not converge, an unreachable
// endpoint); 2 the command line is wrong (an unknown flag, a negative rate,
// RF larger than the brokers, ...), said in one line on stderr naming the
// flag; 130 interrupted (SIGINT or SIGTERM), after a clean shutdown.
//
// Every numeric flag is checked before anything runs, against limits far
// beyond any deployment that also keep every figure finite: a throughput
// (--rate, --mb-per-sec) is between 0.000001 MB/s (a byte a second) and 10^9
// MB/s (a petabyte a second); a price flag of cost is between 0 and
// $1,000,000 per unit; cost takes up to 10,000,000 partitions (and metadata
// partitions), 100,000 brokers and a 24h flush interval; demo takes up to
// 100,000 partitions, 100 brokers, 1MiB batches and 64MiB objects (the
// leaders' upload buffer, walstore's default, bounds an object). A value a
// flag cannot hold (1e999, 2^64, a malformed duration) is refused by the
// flag parser, naming the flag, also with exit code 2.
//
// # demo
//
//	activetier demo [--duration 10s] [--rate 10] [--partitions 300] [--topics 4] [--brokers 3]
//	                [--azs 3] [--rf 3] [--interval 100ms] [--object-bytes 4MiB]
//	                [--batch-bytes 16KiB] [--codec zstd] [--profile s3express]
//	                [--fail-az AZ] [--corrupt-follower] [--seed 1] [--drain-timeout 30s] [--json] [--verbose]
//	                [--metrics-addr HOST:PORT] [--report FILE.html]
//	                [--cpuprofile FILE] [--memprofile FILE]
//	                [--readers N [--reader-share 1]]
//	                [--s3-endpoint URL [--buckets AZ=BUCKET,...] [--create-buckets]
//	                 [--keep-objects] [--s3-compatible=true] [--region R]]
//	                [--store KIND=VALUE [--keep-objects]]
//
// runs a cluster in one process: brokers spread over AZs (one memstore bucket
// per AZ, with the chosen latency profile), a metadata log with a partition
// per broker, and on every broker one walstore Node, leading some partitions
// and following the others, with rack-aware
// placement (a partition's replicas are in distinct AZs). The partitions
// belong to --topics topics, one each and the rest in proportion N, N-1,
// ..., 1, so that the topics differ in traffic. A producer appends
// Kafka v2 record batches of JSON log lines, generated from --seed, at --rate
// MB/s to the partitions' leaders for --duration; followers report their
// progress to the leaders' garbage collectors. With --fail-az the AZ's bucket
// goes down halfway and its brokers crash; after a short failure detection
// the partitions they led move to the surviving replica with the longest log
// at the next epoch, which announces the epoch and republishes what the
// other survivors may lack (in a run shorter than a producer step, at its
// end). Production then stops, followers drain, and every
// live follower's log is compared with its leader's, batch by batch and byte
// for byte.
//
// Followers and direct readers check their logs' rolling digests (package
// digest) against those the leaders publish with their entries; the
// report's digests line (JSON: "digests": checks, mismatches, taken,
// mismatch_list of partition, epoch, publisher, from, to, what) totals
// them, and any mismatch makes the run inconsistent ("consistent" false)
// and the command exit 1, whatever the log comparison says. With
// --corrupt-follower, a third of the way through, one follower's local log
// starts returning one changed byte in the last batch it holds of a
// partition (a copy: the stored bytes are not touched), and that broker is
// restarted from its log (producing to what it leads pauses until its
// followers caught up and it leads again, at the next epoch, and to that
// partition until the follower has read the batch back):
// reading back the last entry it held, it reports the mismatch ("reread"),
// which the report lists with the batch changed ("digests.corrupted").
//
// With --readers N, N direct consumer readers (package directread), reader
// k in the AZ after the k-th, tail --reader-share of the partitions from
// offset 0 straight from the objects; the leaders keep each object until
// the readers have read it. The report gives each reader's records, lag,
// GETs (per object read) and cost next to consuming the same bytes across
// AZs from the leaders, and readers_consistent: every reader yielded
// exactly its partitions' committed logs, as the leaders have them at the
// end, byte for byte (a reader in the --fail-az AZ stops with it, and what
// it yielded must be their start); a reader that is not makes the command
// exit 1.
//
// Progress is a redrawn status line on a terminal and a plain line per second
// otherwise. The closing report gives bytes produced and replicated, objects,
// requests, metadata bytes, replication lag (p50, p99, max, from the records'
// produce time to a follower's append), whether the followers are consistent,
// and the run's cost priced by package costmodel next to replicating the same
// batches broker to broker across AZs at the same RF, like with like: the
// batches are generated uncompressed, so the broker-to-broker side is priced
// on them as producers compressing with the sections' codec would send them
// (measured on a sample), and the report says so, with the comparison
// against the uncompressed batches beside it. It also lists the topics that
// cost most and the costliest partitions, from a metering.Meter around every
// broker's store and the metadata log, which attributes every request, byte
// and metadata message to the partitions that caused it (the "ledger" of
// --json, which sums to cost_usd). With
// --metrics-addr the run's Prometheus metrics (package promexport) are
// served at /metrics while it runs; --report writes one self-contained HTML
// file with charts of the run over time. With --json only the
// report is printed, as one JSON object with snake_case fields
// (followers_consistent, lag_p50_ms, lag_p99_ms, puts, gets, metadata_bytes,
// bytes_produced, cost_usd, cross_az_cost_usd, ...). Followers that do not
// converge within --drain-timeout make the command exit 1 after the report;
// when the drain ran out with followers still catching up, the report
// (drain_timed_out) and the error say so and suggest a longer
// --drain-timeout, since that is replication unfinished, not data lost; the
// error also says so when --interval is not shorter than --drain-timeout,
// as then the last batches may not have been uploaded before the
// comparison.
//
// With --s3-endpoint the buckets are on an S3-compatible server (versitygw,
// MinIO, ...) instead of in memory; everything else, the metadata log
// included, stays as it is. Every broker has an s3express store of its own,
// writing to its AZ's bucket and reading all of them, and credentials and
// region come from the standard AWS environment (AWS_ACCESS_KEY_ID,
// AWS_PROFILE, AWS_REGION, ...; --region overrides the region, us-east-1 if
// none is found). --buckets maps each AZ to its bucket and so also names the
// AZs, in the order brokers are spread over them (use1-az4=wal--use1-az4--x-s3
// for directory-style names, which s3express checks against the AZ id); the
// default is activetier-demo-az1, activetier-demo-az2, ... for --azs AZs.
// --s3-compatible, true by default since the flag is for such servers,
// selects path-style addressing and, for directory-style names, plain SigV4
// instead of S3 Express sessions; set it false only for an endpoint that is
// AWS itself. Before the cluster starts, one HEAD request per bucket checks
// that the endpoint answers and the bucket exists (--create-buckets creates
// it), so that a wrong endpoint or bucket ends the command at once with exit
// code 1 instead of stalling the engines.
//
// The run writes under a key prefix of its own
// (activetier-demo/TIME-RANDOM/), so runs sharing buckets never meet.
// Garbage collection deletes most objects as followers apply them; at the
// end, after a failure or an interrupt too, the demo deletes what is left
// under the prefix, unless --keep-objects, and the report's "s3" line (JSON:
// endpoint, buckets, key_prefix, objects_left) says how much that was. The
// report's requests and bytes are counted in the
// stores' HTTP clients, per attempt (the SDK's retries included), as S3
// bills them and as memstore counts its own; the latency is the server's,
// and --profile only chooses the price list. One endpoint cannot lose an AZ,
// so --fail-az simulates it in those clients: from then on every broker's
// requests to that AZ's bucket are refused before they are sent, with a
// dial error that the SDK retries and s3express reports as
// storage.ErrUnavailable, as for a real unreachable endpoint. The refused
// attempts count as requests that failed, as memstore counts those its
// outages fail. On S3 and with --store the report tells the requests
// whose caller stopped waiting (a hedge's loser cancelled, an attempt past
// the engine's timeout, a success that came after) from the failed ones,
// as given_up_requests, and splits the PUTs by how each ended, as
// put_outcomes {stored, failed, given_up}, which sum to puts; memstore
// counts the given-up ones as failed, and has no put_outcomes.
//
// --store KIND=VALUE keeps the buckets in another object store; KIND names
// the store and VALUE where it keeps them, in its own terms. dir=PATH is
// package fsstore, a directory per AZ, made for the run
// below PATH (activetier-demo-TIME-RANDOM/az1, ...), which must be an
// existing directory on a local disk, NFS, EFS or FSx. Every broker has an
// fsstore.Store of its own. The latency is the file system's, so --profile
// is refused; the run is priced with costmodel's "filesystem" list, which
// charges nothing per request or byte moved and leaves out what EFS or FSx
// bill for storage and throughput, as the report says. Calls are counted
// as requests (a Delete call as one), and --fail-az makes every broker's
// calls to that AZ's directory fail with storage.ErrUnavailable. At the
// end the run's directory is removed, unless --keep-objects; the report's
// "dir" line (JSON: "store": kind, location, buckets, objects_left) says
// how many objects garbage collection had left.
//
// gcs=PREFIX is package gcsstore: bucket PREFIX-az1 for az1, and so on,
// each checked with one request and created when missing (in the project
// GOOGLE_CLOUD_PROJECT names; on an emulator any), every object under a
// key prefix of the run's own, as with --s3-endpoint. With
// ACTIVETIER_GCS_ENDPOINT set (the variable scripts/test.sh sets for
// fake-gcs-server) the buckets are on that emulator, without
// authentication; otherwise on Cloud Storage with the standard Google
// credentials (Application Default Credentials). Every broker has a
// gcsstore.Store of its own, closed at the end. The run is priced with
// costmodel's "gcsstandard-2026" list, since the buckets the demo creates
// are regional Standard buckets reached over HTTP, not zonal ones. Calls
// are counted as requests (a Delete as one per object, as Cloud Storage
// deletes them; a store's own retries are not seen), and --fail-az refuses
// every broker's calls to that AZ's bucket with storage.ErrUnavailable.
// At the end what garbage collection left under the run's prefix is
// deleted, unless --keep-objects; the buckets stay. The report's "gcs"
// line names the endpoint and the prefix.
//
// --store and --s3-endpoint exclude each other.
//
// Every run splits its CPU, from the start of producing to the end of the
// checks (cpu_s), into the engines' (leaders, followers, direct readers),
// the codec's (zstd or s2), memstore's object store, the brokers' local
// logs (memstore.LocalLog), the metadata log, the demo's own (generator,
// meters, samplers, the end-of-run comparison) and the Go runtime's
// (background garbage collection, the scheduler): the "cpu split" line,
// cpu_split in --json. It profiles the run (runtime/pprof, into memory) and
// attributes each sample on two counts: pprof labels say on whose behalf
// (walstore labels its engines' goroutines activetier=leader and
// activetier=follower, the demo its readers' reader and its own demo;
// goroutines inherit them), and the innermost stack frame of a known
// package says in which component (a klauspost/compress frame anywhere
// makes the sample the codec's). Labels alone cannot separate an engine
// from the store or log it calls on the same goroutine, and frames alone
// cannot tell a leader from a follower, which run the same walstore code,
// so the split uses both. The parts sum to the profiled CPU, at most cpu_s
// (the profiler samples 100 times a second). After the run the demo times
// the floor on the first 64 MiB of the batches it produced: the codec's
// encode once, its decode at each follower, and one copy and one xxhash at
// each replica, per replicated GB ("cpu floor", cpu_floor), beside the
// leaders' and followers' engines' CPU per replicated GB, codec included,
// and their ratio.
//
// --cpuprofile writes that CPU profile of the run, --memprofile a heap
// profile taken once the followers caught up, while the cluster still
// runs (read either with go tool pprof).
//
// # bench
//
//	activetier bench [--partitions 1000,10000,100000] [--rates 10,100] [--duration 10s]
//	                 [--drain-timeout 30s] [--seed 1] [--json]
//	                 [--cpuprofile FILE] [--memprofile FILE]
//
// runs the demo's cluster (3 brokers in 3 AZs, RF 3, the s3express latency
// profile, one process) once for each pair of a partition count and a
// produce rate in MB/s, each for --duration, and prints one table with a
// row per run: produced and replicated MB/s (replicated counts every
// follower's copy, over the run and its drain), lag p50 and p99 from
// produce to follower append, the process's CPU seconds per replicated GB
// (while producing and draining, the harness included), its peak resident
// set during the run, metadata bytes published per byte produced, and
// whether every follower's log equals its leader's; and the run's CPU
// split as the demo has it: the engines', codec's, object store's, local
// logs' and demo's shares of the profiled CPU, the engines' CPU seconds per
// replicated GB, the floor's, and the one over the other. The header names the
// machine (CPUs, Go version, OS and architecture), so a table says what it
// was measured on. Each run starts from a collected heap and, where the
// system allows, a reset peak resident set; where it does not, the peak is
// the process's so far and the output says so. --json prints the machine
// and the rows as one JSON object; --cpuprofile writes the runs' profiles
// merged (each from the start of producing to the end of its checks),
// --memprofile the heap of its last run once its followers caught up. A
// run whose followers differ from their leader makes the command exit 1
// after the table.
//
// # inspect
//
//	activetier inspect [--json] [--max-bytes 256MiB] FILE
//	activetier inspect [--json] [--max-bytes 256MiB] -     (the object on stdin)
//	activetier inspect [--json] [--max-bytes 256MiB] --bucket B [--s3-endpoint URL] [--region R] KEY
//
// reads a combined object, lists its index from the footer (partition, record
// epoch, offsets, batch count, byte range, codec, sizes, checksum, newest
// timestamp), and verifies each section on its own, as a follower that
// fetched only that range would, then the object as a whole (its header, and
// that a partition's sections ascend in offsets and epochs). A corrupt object
// is still listed, with the bad section marked, and the command exits 1 with
// a line naming the section's index, partition and offsets (or the header,
// footer or trailer). With --bucket the object is read through package
// s3express: from AWS (S3 Express directory buckets included) or, with
// --s3-endpoint, from an S3-compatible server; credentials and region come
// from the standard AWS environment.
//
// Memory is bounded by --max-bytes (default 256MiB, the decompressed size up
// to which a follower with default options decodes a section), whatever the
// object's size or the size an S3 server claims for it: no read is larger,
// and no section is decompressed to more. An object of at most --max-bytes is
// read at once (one GET); a larger file or bucket object is read by ranges,
// as a follower reads it: the tail with the trailer, the index if the tail
// did not hold it, then one section at a time. The size a file or server
// gives only says where the tail is; the trailer must agree with it. What has
// no size to go by (stdin from a pipe, a device) is read whole, and the
// command stops with exit 1 as soon as it is longer than --max-bytes. An
// index or section longer than --max-bytes, or a section decompressing to
// more, is reported as such (exit 1). The process holds at most about twice
// --max-bytes (an object or a section, and a section decompressed), plus the
// runtime's few MiB.
//
// # cost
//
//	activetier cost [--mb-per-sec 30] [--partitions 300] [--rf 3] [--brokers 3]
//	                [--leaders N] [--interval 250ms] [--object-bytes SIZE]
//	                [--batch-bytes SIZE] [--followers-per-object F]
//	                [--ranges-per-follower R] [--retention D] [--metadata-partitions N]
//	                [--preset s3express|s3standard|filesystem] [--gib] [--put-per-1000 USD]
//	                [--get-per-1000 USD] [--upload-per-gb USD] [--retrieval-per-gb USD]
//	                [--storage-per-gb-month USD] [--cross-az-per-gb USD]
//	                [--cross-az-out-per-gb USD] [--cross-az-in-per-gb USD]
//	                [--per second|hour|day|month] [--json]
//	                [--wait-fraction F --wait-cut-delay D]
//	                [--plan [--latency-budget 200ms]]
//
// prices a steady workload with package costmodel: object sizes, requests
// and metadata per second, and a table of what activetier costs next to
// broker-to-broker replication, line by line, with the throughput at which
// activetier breaks even. Price flags override the preset's figures. With
// --plan the planner suggests the flush interval and object size that keep
// the p99 replication lag within --latency-budget at the lowest cost (using
// the preset's latency model), and says why, including when the feature does
// not pay and from which interval it would; --interval and --object-bytes,
// if given, are then the largest it may choose. --wait-fraction and
// --wait-cut-delay price a leader that cuts within --wait-cut-delay for
// the producers that wait (walstore's NodeConfig.WaitCutDelay): the extra
// PUTs, up to one per bound per leader, next to the rate without waiters.
package main
