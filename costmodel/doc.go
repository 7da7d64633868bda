// Package costmodel is the arithmetic of active-segment tiering: what it costs
// to replicate a log's newest bytes through an object store in the leader's AZ
// (S3 Express One Zone or S3), what the same bytes cost replicated broker to
// broker across AZs, and which flush interval and object size keep the
// replication lag within a budget at the lowest cost. It answers the question
// the public KIP-1176 discussion kept returning to: when does this pay, and
// when does it not?
//
// The package does no I/O and imports nothing from the module. Every input is
// validated, errors name the field (errors.Is ErrInvalid, errors.As
// *FieldError), and valid inputs never produce NaN or Inf: an input so
// extreme that a result would overflow is an error too.
//
// # Units
//
// Money is US dollars, as float64. Prices are data (Prices): start from
// S3Express2025 or S3Standard2025 (us-east-1, 2025; docs/design.md,
// "Reference prices and latencies", with sources), or Filesystem for a
// mounted file system, which bills no requests, and override fields. "Per
// GB" means per Prices.BytesPerGB bytes: the presets use DecimalGB = 10^9
// because the worked examples of the KIP-1176 discussion are decimal — the
// $0.96e-6 upload of the 0.3 MB / 100-partition example is exactly
// 3e5/1e9 × $0.0032 and nothing else gives it.
// AWS's own S3 pricing examples divide by 2^30 (BinaryGB); to match a bill,
// set BytesPerGB = BinaryGB: every per-byte charge on both paths drops by
// 6.9% and request charges do not change. A month is SecondsPerMonth = 730
// hours, the AWS pricing calculator's month.
//
// # The two paths
//
// Broker to broker, the leader sends each produced byte to RF-1 followers,
// each in another AZ, and EC2 bills the byte leaving one instance and
// entering the other (CrossAZOutPerGB + CrossAZInPerGB, $0.02/GB together):
//
//	replication = produced bytes · (RF-1) · crossAZ
//
// Through the object store, the leader PUTs one combined object per cut into
// its own AZ's bucket, followers GET their byte ranges from it, and S3 does
// not bill the cross-AZ hop of a GET inside the region:
//
//	PUT       = objects · PUT price
//	GET       = range GETs · GET price
//	upload    = bytes PUT · upload price        (S3 Express only)
//	retrieval = bytes read · retrieval price    (S3 Express only)
//	storage   = bytes held · time · storage price
//	metadata  = metadata bytes crossing AZs · crossAZ
//
// The metadata line is what still travels broker to broker: the metadata log
// (a Kafka topic, say) lives on brokers in every AZ, so each entry crosses AZ
// boundaries when the leader publishes it, when the log replicates it, and
// when a follower reads it, at EC2's cross-AZ price.
//
// Both paths also pay for the follower's fetch to the leader, which remains
// with activetier because the leader needs the followers' end offsets to
// advance the high watermark and the followers need the high watermark
// (ControlUSD, DefaultControlBytesPerPartition per partition per follower per
// object). Broker-to-broker followers send the same headers with their data,
// at least as often, so the model charges the same amount to both: it shows
// in the totals and never moves the savings.
//
// RunCost prices a measured run (Usage: counts a demo or an accounting
// store fills in). WorkloadCost prices a steady state (Workload) per second,
// with PerDay and PerMonth.
//
// # Workload geometry
//
// A workload's Leaders (by default min(Brokers, Partitions)) each lead
// k = Partitions/Leaders partitions at r = BytesPerSecond/Leaders, and cut an
// object every T = min(FlushInterval, MaxObjectBytes/r). Per leader:
//
//	objects/s         = Q/T
//	object bytes      = r·T/Q
//	sections/object   s = k·q/Q
//
// where q and Q are the probabilities that a partition, and the leader, had a
// batch in the window: with Workload.BatchBytes = b and Poisson arrivals,
// q = 1-exp(-(r/k)/b·T) and Q = 1-exp(-(r/b)·T); without it q = Q = 1, which
// overstates requests when partitions are slow (conservative).
//
// A leader that cuts for waiters (Workload.WaitFraction of appends waited
// for, cut within WaitCutDelay = d) cuts sooner: with waited appends
// Poisson at λ = WaitFraction·r/b, the mean time between cuts is
// T' = d + (1-exp(-λ·(T-d)))/λ, from T without waits down to d (PUTs/s up
// to 1/d per leader), and T' replaces T above. Without BatchBytes, λ is
// taken as unbounded: T' = d, the most PUTs.
//
// Each object is read by D distinct followers. With random placement, each of
// the other Brokers-1 brokers follows a given partition with probability
// (RF-1)/(Brokers-1), so
//
//	D = (Brokers-1)·(1 - (1 - (RF-1)/(Brokers-1))^s)
//
// (Workload.FollowersPerObject overrides it, e.g. the 0.3 MB / 100-partition
// example, where every partition has a different follower: D = s·(RF-1)).
// Each follower issues R range GETs per object (Workload.RangesPerFollower,
// default 1): S3 accepts one byte range per GET, so R = 1 needs the
// sections a follower reads to be adjacent, which the combiner's follower
// grouping achieves exactly for RF=2 and when every broker follows every
// partition, and approximately otherwise; R is capped at the follower's
// s·(RF-1)/D sections, the no-coalescing case. Reading a gap
// of unwanted bytes between two sections is cheaper than a second GET while
// the gap is below Prices.CoalesceGapBytes (50 KB at 2025 Express prices).
// Then, cluster-wide with O objects/s:
//
//	PUTs/s = O        GETs/s = O·D·R
//	upload bytes/s = BytesPerSecond      retrieval bytes/s = BytesPerSecond·(RF-1)
//
// Metadata routing is follower affinity (docs/design.md, "Data flow"): an
// entry goes to each of its RF-1 followers' metadata partitions, batched
// into one message per follower per object, so leaders publish
//
//	m = O·(s·(RF-1)·MetadataEntryBytes + D·MetadataMessageOverheadBytes)
//
// bytes/s, and the AZ crossings are m·MetadataRF (publish, then MetadataRF-1
// replicas) plus m·readers (each follower's read), readers being
// Brokers/MetadataPartitions when followers share a metadata partition (the
// metadata fan-out; the KIP-1176 discussion's 50 partitions for 100 brokers
// is 2) and 1 otherwise. DefaultMetadataEntryBytes (16) is a placeholder for
// the codec's measured size; the discussion assumed 30.
//
// # What is not counted
//
//   - Producer and consumer traffic: identical on both paths (a producer in
//     another AZ crosses it either way), so it is excluded from both.
//   - Storage, unless Workload.Retention (or Usage.StoredByteSeconds) says
//     how long objects live. Objects deleted once followers applied them
//     cost next to nothing; objects kept until their data is tiered cost
//     StoragePerGBMonth for every GB held: at 100 MB/s, $39.60 a month for
//     each hour of retention on S3 Express.
//   - Request retries (S3's SLA allows ~1e-3 of requests to fail, so ≤0.1%
//     of request cost), hedged GETs (each hedge is another GET), DELETEs
//     (free), LIST and HEAD for garbage collection and recovery, and S3
//     Express CreateSession calls.
//   - KMS request charges for SSE-KMS, and NAT gateway processing: reach S3
//     through a gateway VPC endpoint, or every byte costs $0.045/GB more.
//   - Object framing (section headers, footer index) and any compression the
//     combiner adds: bytes are as the leader stores them, on both paths.
//   - KIP-405 tiering of closed segments, instance and disk costs, and
//     negotiated discounts (override the prices).
//
// # Lag and the planner
//
// A record waits for its object to be cut, then for the PUT, the metadata
// entry and the follower's GET:
//
//	lag = U(0, T) + PUT(object bytes) + MetadataDelay + GET(range bytes)
//
// PUT and GET are lognormal with medians growing linearly in the bytes moved
// (Latency; S3ExpressLatency and S3StandardLatency are the fits of
// docs/design.md, "Reference prices and latencies").
// WorkloadLag returns the p50 and p99 of the sum itself, not the sum of the
// parts' quantiles: the wait and the GET are integrated in closed form, the
// PUT by the trapezoidal rule, and the result agrees with a Monte Carlo
// simulation to well under 1%.
//
// PlanWorkload picks the longest whole-millisecond flush interval whose p99
// lag fits the budget, because cost only falls as the interval grows (fewer
// PUTs, GETs and entries per byte) while lag only rises; it caps objects at
// their expected size, so a burst is cut by size and keeps the lag in budget.
// It says plainly when the result does not pay, names the largest cost line,
// and gives the shortest interval that breaks even, if any.
//
// # Where it stops paying
//
// Per produced byte, activetier saves (RF-1)·crossAZ and pays upload +
// (RF-1)·retrieval: $0.0044 against $0.04 per GB at RF=3 on S3 Express, so
// per-byte fees alone never sink it at list prices, but a cross-AZ price
// below $0.0011/GB each way would. What sinks it is requests and metadata
// per byte, which grow as objects shrink: low throughput, short intervals,
// and — the worry of the KIP-1176 discussion — many brokers, because the
// same bytes are split over more leaders into more, smaller objects, each
// read by more followers.
// BreakEvenThroughput and BreakEvenBrokers find where the savings cross zero.
// At RF=3, 1000 partitions, 6 brokers and a 100 ms flush, activetier pays
// above ~2.9 MB/s; at 100 MB/s it stops paying at 251 brokers.
//
// # The KIP-1176 discussion's numbers
//
// The worked examples of docs/design.md, "Worked cost examples from the
// KIP-1176 discussion", come out exactly. The 0.3 MB / 100-partition example
// (one PUT, 100 GETs, RF=2): write $2.09e-6, read $3.18e-6, broker to broker
// $6e-6, savings 12.2%, and the break-even of one PUT per 125 GETs holds for
// 0.3 MB objects (124.3). The discussion's RF=3 figure (56%) kept the read
// cost of RF=2; with two followers per partition the object is read twice
// as often and the savings are 29.6%. The 3 KB metadata broadcast (every one
// of 100 brokers reading a 3 KB metadata message)
// costs $6e-6 per object at cross-AZ prices, as much as the replication of a
// 0.3 MB object it replaces; follower-affinity routing is what removes it.
package costmodel
