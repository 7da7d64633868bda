package costmodel

import (
	"fmt"
	"math"
	"time"
)

// Defaults for the Workload fields whose zero value means "use the default".
const (
	// DefaultMetadataEntryBytes is the encoded size of one partition entry.
	// The KIP-1176 discussion assumed 30 bytes; the codec does better (see
	// package metadata). 16 is a placeholder until the metadata codec's
	// measured figure replaces it.
	DefaultMetadataEntryBytes = 16
	// DefaultMetadataMessageOverheadBytes is the framing of one metadata
	// message: a Kafka v2 record batch header (61 bytes) and one record's
	// framing. One message goes to each follower's metadata partition per
	// object, so it dominates when objects have few entries per follower.
	DefaultMetadataMessageOverheadBytes = 70
	// DefaultMetadataRF is the metadata log's own replication factor (a
	// Kafka topic at RF=3, each replica in another AZ).
	DefaultMetadataRF = 3
	// DefaultMetadataCrossings is how many AZ boundaries a published
	// metadata byte crosses with the defaults: the publish to the log's
	// partition leader, DefaultMetadataRF-1 replica copies, and the
	// follower's read. It is conservative: with partition leaders spread
	// over three AZs a client hop stays inside the AZ a third of the time.
	DefaultMetadataCrossings = 1 + (DefaultMetadataRF - 1) + 1
	// DefaultControlBytesPerPartition is one partition's share of a
	// follower's fetch to the leader and its response without records
	// (Kafka FetchRequest v13+: offset, epochs, log start, max bytes;
	// response: high watermark, last stable offset, log start, error).
	DefaultControlBytesPerPartition = 72
)

// Workload describes a cluster's steady state: how much is produced, how
// partitions are placed, and how the leader cuts objects. Fields marked
// optional may be left zero.
type Workload struct {
	// BytesPerSecond is the cluster's produced bytes per second, as stored
	// (after producer compression): what every follower must receive.
	BytesPerSecond float64
	// Partitions is the number of partitions producing, spread evenly over
	// the leaders.
	Partitions int
	// BatchBytes is the mean size of the record batches producers send
	// (optional). With it, a partition that received no batch during a cut
	// interval is absent from that object (Poisson arrivals). Zero assumes
	// every partition has data in every object, which overstates requests
	// and metadata when partitions are slow: a conservative default.
	BatchBytes float64

	// Brokers is the cluster size; each partition's RF replicas are on
	// distinct brokers in distinct AZs.
	Brokers int
	// Leaders is how many brokers lead these partitions (optional; zero
	// means min(Brokers, Partitions), i.e. leadership spread evenly).
	Leaders int
	// RF is the replication factor: RF-1 followers per partition, each in
	// an AZ other than the leader's.
	RF int
	// FollowersPerObject is how many distinct brokers read each object
	// (optional; the fan-out). Zero derives it from random placement: an
	// object with s sections is read by
	//   (Brokers-1)·(1 - (1 - (RF-1)/(Brokers-1))^s)
	// followers. A value above what an object can have (s·(RF-1)) is capped.
	FollowersPerObject float64
	// RangesPerFollower is how many range GETs one follower issues per
	// object (optional; zero means 1). 1 holds when sections sharing a
	// follower are adjacent (the combiner's follower grouping, exact for
	// RF=2 and when every broker follows every partition); more when a
	// follower's sections are scattered. It is capped at the number of
	// sections the follower has in the object, the uncoalesced case.
	RangesPerFollower float64

	// FlushInterval is the longest a leader waits before cutting an object.
	FlushInterval time.Duration
	// MaxObjectBytes cuts an object early when it reaches this size
	// (optional; zero means no size limit).
	MaxObjectBytes int64
	// WaitFraction is the fraction of appends whose callers wait for
	// their acknowledgement (acks=all: WaitDurable or WaitReplicated), and
	// WaitCutDelay the leader's bound on cutting for them
	// (walstore.NodeConfig.WaitCutDelay), both optional: zero leaves cuts
	// at FlushInterval. With both set, a leader cuts a waited append's
	// object WaitCutDelay after it arrived, so it cuts more often: up to
	// 1/WaitCutDelay per leader (see WaitCutInterval). WaitCutDelay may
	// not exceed FlushInterval (the planner, which varies the interval,
	// ignores waits at intervals below it, as the interval cuts first).
	WaitFraction float64
	WaitCutDelay time.Duration
	// Retention is how long an object stays in the bucket before garbage
	// collection deletes it (optional; zero leaves storage out, right when
	// objects go as soon as every follower applied them, not when they are
	// kept until the data is tiered).
	Retention time.Duration

	// MetadataEntryBytes is the encoded size of one partition entry
	// (optional; zero means DefaultMetadataEntryBytes).
	MetadataEntryBytes float64
	// MetadataMessageOverheadBytes is the framing of one metadata message
	// (optional; zero means DefaultMetadataMessageOverheadBytes).
	MetadataMessageOverheadBytes float64
	// MetadataRF is the metadata log's replication factor (optional; zero
	// means DefaultMetadataRF).
	MetadataRF int
	// MetadataPartitions is the metadata log's partition count (optional;
	// zero means at least one per broker). With fewer partitions than
	// brokers, Brokers/MetadataPartitions followers share a partition and
	// each reads all of its entries: the metadata fan-out.
	MetadataPartitions int
	// ControlBytesPerPartition is one partition's share of a follower's
	// offset/high-watermark fetch to the leader, sent once per object the
	// partition is in (optional; zero means DefaultControlBytesPerPartition).
	ControlBytesPerPartition float64
}

// withDefaults fills the optional fields that have defaults.
func (w Workload) withDefaults() Workload {
	if w.Leaders == 0 {
		w.Leaders = min(w.Brokers, w.Partitions)
	}
	if w.RangesPerFollower == 0 {
		w.RangesPerFollower = 1
	}
	if w.MetadataEntryBytes == 0 {
		w.MetadataEntryBytes = DefaultMetadataEntryBytes
	}
	if w.MetadataMessageOverheadBytes == 0 {
		w.MetadataMessageOverheadBytes = DefaultMetadataMessageOverheadBytes
	}
	if w.MetadataRF == 0 {
		w.MetadataRF = DefaultMetadataRF
	}
	if w.ControlBytesPerPartition == 0 {
		w.ControlBytesPerPartition = DefaultControlBytesPerPartition
	}
	return w
}

// Validate reports every field the model cannot use, naming each.
func (w Workload) Validate() error {
	var c checker
	w.check(&c, true)
	return c.err()
}

// check validates w; withCut is false for the planner, which chooses the
// flush interval and object size itself.
func (w Workload) check(c *checker, withCut bool) {
	c.positive("Workload.BytesPerSecond", w.BytesPerSecond)
	if w.Partitions < 1 {
		c.fail("Workload.Partitions", w.Partitions, "must be at least 1")
	}
	c.nonNegative("Workload.BatchBytes", w.BatchBytes)
	checkRF(c, "Workload.RF", w.RF)
	if w.Brokers < w.RF {
		c.fail("Workload.Brokers", w.Brokers, fmt.Sprintf("must be at least RF (%d): replicas are on distinct brokers", w.RF))
	}
	if w.Leaders < 0 || w.Leaders > max(0, min(w.Brokers, w.Partitions)) {
		c.fail("Workload.Leaders", w.Leaders, "must be 0 (derived) or between 1 and min(Brokers, Partitions)")
	}
	if c.finite("Workload.FollowersPerObject", w.FollowersPerObject) && w.FollowersPerObject != 0 &&
		(w.FollowersPerObject < float64(w.RF-1) || w.FollowersPerObject > float64(w.Brokers-1)) {
		c.fail("Workload.FollowersPerObject", w.FollowersPerObject,
			"must be 0 (derived) or between RF-1 and Brokers-1: each section has RF-1 followers, none of them the leader")
	}
	if c.finite("Workload.RangesPerFollower", w.RangesPerFollower) && w.RangesPerFollower != 0 && w.RangesPerFollower < 1 {
		c.fail("Workload.RangesPerFollower", w.RangesPerFollower, "must be 0 (meaning 1) or at least 1")
	}
	if withCut {
		if w.FlushInterval <= 0 {
			c.fail("Workload.FlushInterval", w.FlushInterval, "must be positive")
		}
		if w.MaxObjectBytes < 0 {
			c.fail("Workload.MaxObjectBytes", w.MaxObjectBytes, "must not be negative (0 means no limit)")
		}
	}
	if c.finite("Workload.WaitFraction", w.WaitFraction) && (w.WaitFraction < 0 || w.WaitFraction > 1) {
		c.fail("Workload.WaitFraction", w.WaitFraction, "must be between 0 and 1")
	}
	c.nonNegativeDuration("Workload.WaitCutDelay", w.WaitCutDelay)
	if withCut && w.FlushInterval > 0 && w.WaitCutDelay > w.FlushInterval {
		c.fail("Workload.WaitCutDelay", w.WaitCutDelay, "must not exceed the flush interval, which cuts first")
	}
	c.nonNegativeDuration("Workload.Retention", w.Retention)
	c.nonNegative("Workload.MetadataEntryBytes", w.MetadataEntryBytes)
	c.nonNegative("Workload.MetadataMessageOverheadBytes", w.MetadataMessageOverheadBytes)
	if w.MetadataRF < 0 {
		c.fail("Workload.MetadataRF", w.MetadataRF, "must not be negative (0 means the default)")
	}
	if w.MetadataPartitions < 0 {
		c.fail("Workload.MetadataPartitions", w.MetadataPartitions, "must not be negative (0 means one per broker)")
	}
	c.nonNegative("Workload.ControlBytesPerPartition", w.ControlBytesPerPartition)
}

// shape is the geometry of a workload's objects, independent of prices. All
// rates are per second, cluster-wide unless named per leader.
type shape struct {
	interval            float64 // effective cut interval in seconds: min(FlushInterval, MaxObjectBytes/leaderRate)
	objectsPerSecond    float64
	objectBytes         float64 // mean size of a (non-empty) object
	sectionsPerObject   float64
	followersPerObject  float64
	sectionsPerFollower float64 // in one object
	rangesPerFollower   float64
	getBytes            float64 // mean bytes per range GET
}

// shapeOf derives the object geometry. w must be valid, with defaults filled.
//
// Per leader: rate r = BytesPerSecond/Leaders over k = Partitions/Leaders
// partitions. The leader cuts every T = min(FlushInterval, MaxObjectBytes/r).
// With batches of mean size b arriving as a Poisson process, a partition has
// data in a window with probability q = 1-exp(-(r/k)/b·T) and the leader with
// Q = 1-exp(-(r/b)·T) (q = Q = 1 without b). Then objects/s per leader = Q/T,
// sections per object s = k·q/Q, object size = r·T/Q.
func shapeOf(w Workload) shape {
	leaders := float64(w.Leaders)
	r := w.BytesPerSecond / leaders
	k := float64(w.Partitions) / leaders
	t := w.FlushInterval.Seconds()
	if w.MaxObjectBytes > 0 {
		t = math.Min(t, float64(w.MaxObjectBytes)/r)
	}
	t = WaitCutInterval(t, w.WaitCutDelay.Seconds(), waitedPerSecond(w, r))
	q, leaderQ := 1.0, 1.0
	if w.BatchBytes > 0 {
		batchesPerSecond := r / w.BatchBytes
		q = -math.Expm1(-batchesPerSecond / k * t)
		leaderQ = -math.Expm1(-batchesPerSecond * t)
	}
	var sh shape
	sh.interval = t
	sh.objectsPerSecond = leaders * leaderQ / t
	sh.objectBytes = r * t / leaderQ
	// k·q/Q ≥ 1 in exact arithmetic; the max guards rounding.
	sh.sectionsPerObject = math.Max(1, k*q/leaderQ)
	followerCopies := sh.sectionsPerObject * float64(w.RF-1)
	if w.FollowersPerObject > 0 {
		sh.followersPerObject = math.Min(w.FollowersPerObject, followerCopies)
	} else {
		sh.followersPerObject = distinctFollowers(w.Brokers, w.RF, sh.sectionsPerObject)
	}
	sh.sectionsPerFollower = followerCopies / sh.followersPerObject
	sh.rangesPerFollower = math.Min(w.RangesPerFollower, sh.sectionsPerFollower)
	sh.getBytes = sh.objectBytes * float64(w.RF-1) / (sh.followersPerObject * sh.rangesPerFollower)
	return sh
}

// waitedPerSecond is the rate of one leader's appends whose callers wait,
// given its byte rate r: Poisson batches of BatchBytes, WaitFraction of
// them waited. Without BatchBytes the appends' rate is unknown, and it is
// taken to be unbounded: a waiter in every WaitCutDelay, the most PUTs.
func waitedPerSecond(w Workload, r float64) float64 {
	switch {
	case w.WaitFraction == 0 || w.WaitCutDelay == 0:
		return 0
	case w.BatchBytes == 0:
		return math.Inf(1)
	}
	return w.WaitFraction * r / w.BatchBytes
}

// WaitCutInterval is the mean time in seconds between one leader's cuts
// when it cuts at interval, or delay after the first append a caller waits
// for, waited appends arriving as a Poisson process of rate per second.
// After a cut, the next waited append comes after X ~ Exp(rate), and the
// cut after min(X+delay, interval), whose mean is
//
//	delay + (1 - e^(-rate·(interval-delay))) / rate
//
// from interval with no waits (rate 0) down to delay when every moment
// has a waiter (rate +Inf): the PUT rate rises up to 1/delay per leader.
// A delay of zero, or not below interval, leaves interval. The model
// then treats cuts as if periodic at this mean (Jensen's gap aside).
func WaitCutInterval(interval, delay, rate float64) float64 {
	switch {
	case rate <= 0 || delay <= 0 || delay >= interval:
		return interval
	case math.IsInf(rate, 1):
		return delay
	}
	return delay - math.Expm1(-rate*(interval-delay))/rate
}

// distinctFollowers is the expected number of distinct brokers among the
// followers of s partitions led by one broker, when each partition's RF-1
// followers are a uniformly random subset of the other brokers-1 brokers:
// each of them is a follower of a given partition with probability
// (RF-1)/(brokers-1), and of none of the s with (1-(RF-1)/(brokers-1))^s.
func distinctFollowers(brokers, rf int, s float64) float64 {
	others := float64(brokers - 1)
	miss := 1 - float64(rf-1)/others
	d := others * (1 - math.Pow(miss, s))
	// Never fewer than one partition's followers, never more than the copies.
	return math.Min(math.Max(d, float64(rf-1)), s*float64(rf-1))
}

// Estimate is a workload's steady-state cost and the rates behind it.
type Estimate struct {
	// Workload is the input with defaults filled in.
	Workload Workload
	// CutInterval is how often each leader cuts an object:
	// min(FlushInterval, MaxObjectBytes / per-leader rate), shortened by
	// waited appends (WaitCutInterval).
	CutInterval time.Duration
	// PutsPerSecondWithoutWaits is PutsPerSecond were no append waited
	// (WaitFraction 0): what cutting for waiters adds is the difference.
	PutsPerSecondWithoutWaits float64
	// ObjectsPerSecond equals PutsPerSecond: one PUT per object.
	ObjectsPerSecond float64
	PutsPerSecond    float64
	// GetsPerSecond is ObjectsPerSecond·FollowersPerObject·RangesPerFollower.
	GetsPerSecond float64
	// ObjectBytes is the mean object size; GetBytes the mean range GET size.
	ObjectBytes float64
	GetBytes    float64
	// SectionsPerObject is the mean number of partitions in an object.
	SectionsPerObject float64
	// FollowersPerObject and RangesPerFollower as used (derived or capped).
	FollowersPerObject float64
	RangesPerFollower  float64
	// UploadBytesPerSecond and RetrievalBytesPerSecond are object store
	// transfer: every byte up once, down RF-1 times.
	UploadBytesPerSecond    float64
	RetrievalBytesPerSecond float64
	// ReplicationBytesPerSecond is what broker-to-broker replication sends
	// across AZs: BytesPerSecond·(RF-1).
	ReplicationBytesPerSecond float64
	// MetadataEntriesPerSecond is one per section.
	MetadataEntriesPerSecond float64
	// MetadataBytesPerSecond is what leaders publish: each entry once per
	// follower, plus one message framing per follower per object.
	MetadataBytesPerSecond float64
	// MetadataCrossAZBytesPerSecond counts each AZ boundary a metadata byte
	// crosses (publish, the log's replication, reads).
	MetadataCrossAZBytesPerSecond float64
	// ControlBytesPerSecond is the follower-to-leader fetch traffic.
	ControlBytesPerSecond float64
	// PerSecond is the cost comparison per second of steady state.
	PerSecond Comparison
}

// PerDay scales the per-second comparison to a day.
func (e Estimate) PerDay() Comparison { return e.PerSecond.Scale(SecondsPerDay) }

// PerMonth scales the per-second comparison to a month of SecondsPerMonth.
func (e Estimate) PerMonth() Comparison { return e.PerSecond.Scale(SecondsPerMonth) }

// WorkloadCost estimates the steady-state cost of replicating w through the
// object store and through brokers. Per second, with O objects/s, D followers
// per object, R ranges per follower, s sections per object, B produced bytes:
//
//	PUT       = O · PUT price
//	GET       = O · D · R · GET price
//	upload    = B · upload price
//	retrieval = B · (RF-1) · retrieval price
//	storage   = B · Retention · storage price
//	metadata  = [m·MetadataRF + m·readers] · crossAZ,
//	            m = O·(s·(RF-1)·entry + D·message overhead),
//	            readers = max(1, Brokers/MetadataPartitions)
//	control   = O · s · (RF-1) · control bytes · crossAZ   (both paths)
//	broker-to-broker replication = B · (RF-1) · crossAZ
func WorkloadCost(p Prices, w Workload) (Estimate, error) {
	if err := p.Validate(); err != nil {
		return Estimate{}, err
	}
	if err := w.Validate(); err != nil {
		return Estimate{}, err
	}
	return estimate(p, w.withDefaults())
}

// estimate computes the Estimate of a valid, defaulted workload.
func estimate(p Prices, w Workload) (Estimate, error) {
	sh := shapeOf(w)
	followerCopies := float64(w.RF - 1)
	e := Estimate{
		Workload:           w,
		CutInterval:        time.Duration(sh.interval * float64(time.Second)),
		ObjectsPerSecond:   sh.objectsPerSecond,
		PutsPerSecond:      sh.objectsPerSecond,
		GetsPerSecond:      sh.objectsPerSecond * sh.followersPerObject * sh.rangesPerFollower,
		ObjectBytes:        sh.objectBytes,
		GetBytes:           sh.getBytes,
		SectionsPerObject:  sh.sectionsPerObject,
		FollowersPerObject: sh.followersPerObject,
		RangesPerFollower:  sh.rangesPerFollower,

		UploadBytesPerSecond:      w.BytesPerSecond,
		RetrievalBytesPerSecond:   w.BytesPerSecond * followerCopies,
		ReplicationBytesPerSecond: w.BytesPerSecond * followerCopies,
		MetadataEntriesPerSecond:  sh.objectsPerSecond * sh.sectionsPerObject,
	}
	e.PutsPerSecondWithoutWaits = e.PutsPerSecond
	if w.WaitFraction > 0 && w.WaitCutDelay > 0 {
		unwaited := w
		unwaited.WaitFraction = 0
		e.PutsPerSecondWithoutWaits = shapeOf(unwaited).objectsPerSecond
	}
	e.MetadataBytesPerSecond = e.MetadataEntriesPerSecond*followerCopies*w.MetadataEntryBytes +
		sh.objectsPerSecond*sh.followersPerObject*w.MetadataMessageOverheadBytes
	readers := 1.0
	if w.MetadataPartitions > 0 && w.MetadataPartitions < w.Brokers {
		readers = float64(w.Brokers) / float64(w.MetadataPartitions)
	}
	e.MetadataCrossAZBytesPerSecond = e.MetadataBytesPerSecond * (float64(w.MetadataRF) + readers)
	e.ControlBytesPerSecond = e.MetadataEntriesPerSecond * followerCopies * w.ControlBytesPerPartition

	control := e.ControlBytesPerSecond * p.crossAZPerByte()
	at := Breakdown{
		PutUSD:       e.PutsPerSecond * p.perPut(),
		GetUSD:       e.GetsPerSecond * p.perGet(),
		UploadUSD:    e.UploadBytesPerSecond * p.uploadPerByte(),
		RetrievalUSD: e.RetrievalBytesPerSecond * p.retrievalPerByte(),
		StorageUSD:   w.BytesPerSecond * w.Retention.Seconds() * p.storagePerByteSec(),
		MetadataUSD:  e.MetadataCrossAZBytesPerSecond * p.crossAZPerByte(),
		ControlUSD:   control,
	}
	b2b := Breakdown{
		ReplicationUSD: e.ReplicationBytesPerSecond * p.crossAZPerByte(),
		ControlUSD:     control,
	}
	e.PerSecond = compare(at, b2b)
	if err := e.checkFinite(); err != nil {
		return Estimate{}, err
	}
	return e, nil
}

// checkFinite turns an overflow (inputs valid but astronomically large) into
// an error instead of letting Inf or NaN reach a report.
func (e Estimate) checkFinite() error {
	for _, v := range []struct {
		name string
		x    float64
	}{
		{"ObjectsPerSecond", e.ObjectsPerSecond}, {"GetsPerSecond", e.GetsPerSecond},
		{"ObjectBytes", e.ObjectBytes}, {"GetBytes", e.GetBytes},
		{"MetadataCrossAZBytesPerSecond", e.MetadataCrossAZBytesPerSecond},
		{"ControlBytesPerSecond", e.ControlBytesPerSecond},
		{"ActiveTier.TotalUSD", e.PerSecond.ActiveTier.TotalUSD},
		{"BrokerToBroker.TotalUSD", e.PerSecond.BrokerToBroker.TotalUSD},
		{"SavingsRatio", e.PerSecond.SavingsRatio},
	} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) {
			return &FieldError{Field: "Workload", Value: v.name + "=" + fmt.Sprint(v.x),
				Problem: "inputs are valid but so extreme that the estimate overflows"}
		}
	}
	return nil
}
