package costmodel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkloadCostOf300KBObjectsOf100Partitions(t *testing.T) {
	// The 0.3 MB / 100-partition example (docs/design.md, "Worked cost
	// examples from the KIP-1176 discussion") as a steady state: one leader
	// cuts a 0.3 MB object of 100 partitions every 100 ms; each partition's
	// one follower is a different broker. Per second that is ten such
	// objects.
	w := Workload{BytesPerSecond: 3e6, Partitions: 100, Leaders: 1, Brokers: 101, RF: 2,
		FollowersPerObject: 100, FlushInterval: 100 * time.Millisecond}
	e, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)

	assert.InEpsilon(t, 10, e.ObjectsPerSecond, exact)
	assert.InEpsilon(t, 10, e.PutsPerSecond, exact)
	assert.InEpsilon(t, 1000, e.GetsPerSecond, exact)
	assert.InEpsilon(t, 300_000, e.ObjectBytes, exact)
	assert.InEpsilon(t, 3000, e.GetBytes, exact)
	assert.InEpsilon(t, 100, e.SectionsPerObject, exact)
	assert.Equal(t, 100*time.Millisecond, e.CutInterval)

	at := e.PerSecond.ActiveTier
	assert.InEpsilon(t, 10*2.09e-6, at.WriteUSD(), exact)
	assert.InEpsilon(t, 10*3.18e-6, at.ReadUSD(), exact)
	assert.InEpsilon(t, 10*6e-6, e.PerSecond.BrokerToBroker.ReplicationUSD, exact)

	// Metadata: 1000 entries/s of 16 bytes, and one 70-byte message framing
	// per follower per object — 100 followers each getting one entry makes
	// the framing most of it. Four AZ crossings each.
	assert.InEpsilon(t, 1000, e.MetadataEntriesPerSecond, exact)
	assert.InEpsilon(t, 1000*16+10*100*70, e.MetadataBytesPerSecond, exact)
	assert.InEpsilon(t, 4*86_000, e.MetadataCrossAZBytesPerSecond, exact)
	assert.InEpsilon(t, 4*86_000*2e-11, at.MetadataUSD, exact)

	// The measured-run path agrees with the steady-state path.
	run, err := RunCost(S3Express2025(), Usage{Puts: 10, Gets: 1000, BytesUp: 3e6, BytesDown: 3e6,
		MetadataBytes: 4 * 86_000, ControlBytes: int64(e.ControlBytesPerSecond), ProducedBytes: 3e6, RF: 2})
	require.NoError(t, err)
	assert.InEpsilon(t, run.ActiveTier.TotalUSD, at.TotalUSD, exact)
	assert.InEpsilon(t, run.BrokerToBroker.TotalUSD, e.PerSecond.BrokerToBroker.TotalUSD, exact)

	// With random placement instead of one distinct follower per
	// partition, fewer brokers read each object.
	w.FollowersPerObject = 0
	e, err = WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, 100*(1-math.Pow(0.99, 100)), e.FollowersPerObject, exact)
}

func TestWorkloadCostThreeBrokersRF3(t *testing.T) {
	// Three brokers, RF=3: every broker follows every partition it does not
	// lead, so each object is read by exactly the two other brokers, each
	// with one coalesced GET of the whole object.
	w := Workload{BytesPerSecond: 90e6, Partitions: 300, Brokers: 3, RF: 3, FlushInterval: 100 * time.Millisecond}
	e, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)

	assert.Equal(t, 3, e.Workload.Leaders)
	assert.InEpsilon(t, 30, e.PutsPerSecond, exact)
	assert.InEpsilon(t, 2, e.FollowersPerObject, exact)
	assert.InEpsilon(t, 1, e.RangesPerFollower, exact)
	assert.InEpsilon(t, 60, e.GetsPerSecond, exact)
	assert.InEpsilon(t, 3e6, e.ObjectBytes, exact)
	assert.InEpsilon(t, 3e6, e.GetBytes, exact)
	assert.InEpsilon(t, 90e6, e.UploadBytesPerSecond, exact)
	assert.InEpsilon(t, 180e6, e.RetrievalBytesPerSecond, exact)
	assert.InEpsilon(t, 180e6, e.ReplicationBytesPerSecond, exact)
	assert.InEpsilon(t, 3000, e.MetadataEntriesPerSecond, exact)
	assert.InEpsilon(t, 3000*2*16+30*2*70, e.MetadataBytesPerSecond, exact)
	assert.InEpsilon(t, 4*100_200, e.MetadataCrossAZBytesPerSecond, exact)
	assert.InEpsilon(t, 3000*2*72, e.ControlBytesPerSecond, exact)

	at, b2b := e.PerSecond.ActiveTier, e.PerSecond.BrokerToBroker
	assert.InEpsilon(t, 30*1.13e-6, at.PutUSD, exact)
	assert.InEpsilon(t, 60*3e-8, at.GetUSD, exact)
	assert.InEpsilon(t, 90e6*3.2e-12, at.UploadUSD, exact)
	assert.InEpsilon(t, 180e6*6e-13, at.RetrievalUSD, exact)
	assert.InEpsilon(t, 400_800*2e-11, at.MetadataUSD, exact)
	assert.InEpsilon(t, 432_000*2e-11, at.ControlUSD, exact)
	assert.Zero(t, at.StorageUSD)
	assert.Zero(t, at.ReplicationUSD)
	assert.InEpsilon(t, 180e6*2e-11, b2b.ReplicationUSD, exact)
	assert.Equal(t, at.ControlUSD, b2b.ControlUSD)

	sum := at.PutUSD + at.GetUSD + at.UploadUSD + at.RetrievalUSD + at.MetadataUSD + at.ControlUSD
	assert.InEpsilon(t, sum, at.TotalUSD, exact)
	assert.InEpsilon(t, b2b.TotalUSD-at.TotalUSD, e.PerSecond.SavingsUSD, exact)

	assert.InEpsilon(t, at.TotalUSD*SecondsPerMonth, e.PerMonth().ActiveTier.TotalUSD, exact)
	assert.InEpsilon(t, b2b.TotalUSD*86400, e.PerDay().BrokerToBroker.TotalUSD, exact)
}

func TestWorkloadCutBySize(t *testing.T) {
	// 30 MB/s per leader with a 1 MB cap: cut every 33.3 ms, not 100 ms.
	w := Workload{BytesPerSecond: 90e6, Partitions: 300, Brokers: 3, RF: 3,
		FlushInterval: 100 * time.Millisecond, MaxObjectBytes: 1_000_000}
	e, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, 1e6, e.ObjectBytes, exact)
	assert.InEpsilon(t, 90, e.PutsPerSecond, exact)
	assert.InEpsilon(t, 1.0/30, e.CutInterval.Seconds(), 1e-7)
}

func TestWorkloadSparsePartitions(t *testing.T) {
	// 1 MB/s over 1000 partitions is 1 KB/s each; with 16 KB batches a
	// partition has data in a 100 ms window with probability
	// 1-exp(-1/160), so objects hold ~2 sections, not 333.
	w := Workload{BytesPerSecond: 1e6, Partitions: 1000, Brokers: 3, RF: 3,
		FlushInterval: 100 * time.Millisecond, BatchBytes: 16e3}
	sparse, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	q := -math.Expm1(-1e3 / 16e3 * 0.1)
	leaderQ := -math.Expm1(-1e6 / 3 / 16e3 * 0.1)
	assert.InEpsilon(t, 3*leaderQ/0.1, sparse.ObjectsPerSecond, exact)
	assert.InEpsilon(t, 1000.0/3*q/leaderQ, sparse.SectionsPerObject, exact)
	assert.InEpsilon(t, 1000*q/0.1, sparse.MetadataEntriesPerSecond, exact)
	assert.InEpsilon(t, 1e6, sparse.ObjectsPerSecond*sparse.ObjectBytes, exact, "every byte is in some object")

	w.BatchBytes = 0
	dense, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.Less(t, sparse.PerSecond.ActiveTier.TotalUSD, dense.PerSecond.ActiveTier.TotalUSD)
	assert.Less(t, sparse.MetadataBytesPerSecond, dense.MetadataBytesPerSecond/10)
}

func TestWorkloadMetadataFanOut(t *testing.T) {
	// The 3 KB metadata broadcast: with one metadata partition (or a hash
	// partitioner), every broker reads every entry.
	w := Workload{BytesPerSecond: 10e6, Partitions: 100, Brokers: 100, RF: 2, FlushInterval: 100 * time.Millisecond}
	routed, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, DefaultMetadataCrossings*routed.MetadataBytesPerSecond, routed.MetadataCrossAZBytesPerSecond, exact)

	w.MetadataPartitions = 1
	broadcast, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, (3+100)*broadcast.MetadataBytesPerSecond, broadcast.MetadataCrossAZBytesPerSecond, exact)

	w.MetadataPartitions = 50 // the KIP-1176 discussion's default: two brokers per partition
	shared, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, (3+2)*shared.MetadataBytesPerSecond, shared.MetadataCrossAZBytesPerSecond, exact)
}

func TestWorkloadRetentionStorage(t *testing.T) {
	// An hour of retention at 100 MB/s keeps 360 GB: $39.60 a month.
	w := Workload{BytesPerSecond: 100e6, Partitions: 10, Brokers: 3, RF: 3,
		FlushInterval: 100 * time.Millisecond, Retention: time.Hour}
	e, err := WorkloadCost(S3Express2025(), w)
	require.NoError(t, err)
	assert.InEpsilon(t, 360*0.11, e.PerMonth().ActiveTier.StorageUSD, exact)
}

func TestDistinctFollowers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		brokers, rf int
		s, want     float64
	}{
		{"every other broker follows", 3, 3, 100, 2},
		{"one section", 50, 3, 1, 2},
		{"two sections, RF=2", 11, 2, 2, 10 * (1 - 0.81)},
		{"many brokers approach one follower set per section", 1e6, 3, 10, 20},
		{"RF=3 of 4 brokers: two sections cover all three others", 4, 3, 2, 3 * (1 - 1.0/9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.InEpsilon(t, tc.want, distinctFollowers(tc.brokers, tc.rf, tc.s), 1e-4)
		})
	}
}

func TestWorkloadRejectsBadInput(t *testing.T) {
	valid := func() Workload {
		return Workload{BytesPerSecond: 1e6, Partitions: 10, Brokers: 6, RF: 3, FlushInterval: time.Millisecond}
	}
	for _, tc := range []struct {
		field string
		mod   func(*Workload)
	}{
		{"Workload.BytesPerSecond", func(w *Workload) { w.BytesPerSecond = 0 }},
		{"Workload.BytesPerSecond", func(w *Workload) { w.BytesPerSecond = math.NaN() }},
		{"Workload.BytesPerSecond", func(w *Workload) { w.BytesPerSecond = math.Inf(1) }},
		{"Workload.Partitions", func(w *Workload) { w.Partitions = 0 }},
		{"Workload.BatchBytes", func(w *Workload) { w.BatchBytes = -1 }},
		{"Workload.RF", func(w *Workload) { w.RF = 1 }},
		{"Workload.Brokers", func(w *Workload) { w.Brokers = 2 }},
		{"Workload.Leaders", func(w *Workload) { w.Leaders = -1 }},
		{"Workload.Leaders", func(w *Workload) { w.Leaders = 7 }},
		{"Workload.Leaders", func(w *Workload) { w.Partitions, w.Leaders = 4, 5 }},
		{"Workload.FollowersPerObject", func(w *Workload) { w.FollowersPerObject = 1 }},
		{"Workload.FollowersPerObject", func(w *Workload) { w.FollowersPerObject = 6 }},
		{"Workload.FollowersPerObject", func(w *Workload) { w.FollowersPerObject = math.NaN() }},
		{"Workload.RangesPerFollower", func(w *Workload) { w.RangesPerFollower = 0.5 }},
		{"Workload.RangesPerFollower", func(w *Workload) { w.RangesPerFollower = math.Inf(1) }},
		{"Workload.FlushInterval", func(w *Workload) { w.FlushInterval = 0 }},
		{"Workload.MaxObjectBytes", func(w *Workload) { w.MaxObjectBytes = -1 }},
		{"Workload.Retention", func(w *Workload) { w.Retention = -time.Second }},
		{"Workload.MetadataEntryBytes", func(w *Workload) { w.MetadataEntryBytes = -16 }},
		{"Workload.MetadataMessageOverheadBytes", func(w *Workload) { w.MetadataMessageOverheadBytes = math.NaN() }},
		{"Workload.MetadataRF", func(w *Workload) { w.MetadataRF = -1 }},
		{"Workload.MetadataPartitions", func(w *Workload) { w.MetadataPartitions = -1 }},
		{"Workload.ControlBytesPerPartition", func(w *Workload) { w.ControlBytesPerPartition = -72 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			w := valid()
			tc.mod(&w)
			_, err := WorkloadCost(S3Express2025(), w)
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field, "%v", err)
			_, err = WorkloadLag(w, S3ExpressLatency())
			assert.ErrorContains(t, err, tc.field)
		})
	}
	w := valid()
	_, err := WorkloadCost(Prices{}, w)
	assert.ErrorContains(t, err, "Prices.BytesPerGB")
}

// randomWorkload draws a valid workload with derived placement.
func randomWorkload(rng *rand.Rand) Workload {
	logUniform := func(lo, hi float64) float64 { return lo * math.Pow(hi/lo, rng.Float64()) }
	rf := 2 + rng.IntN(3)
	w := Workload{
		BytesPerSecond: logUniform(1e3, 1e10),
		Partitions:     1 + rng.IntN(5000),
		RF:             rf,
		Brokers:        rf + rng.IntN(300),
		FlushInterval:  time.Duration(logUniform(float64(time.Millisecond), float64(10*time.Second))),
	}
	if rng.IntN(2) == 0 {
		w.BatchBytes = logUniform(100, 1e7)
	}
	if rng.IntN(3) == 0 {
		w.MaxObjectBytes = int64(logUniform(1e4, 1e9))
	}
	if rng.IntN(3) == 0 {
		w.RangesPerFollower = 1 + 4*rng.Float64()
	}
	if rng.IntN(3) == 0 {
		w.MetadataPartitions = 1 + rng.IntN(100)
	}
	if rng.IntN(3) == 0 {
		w.Retention = time.Duration(rng.Int64N(int64(time.Hour)))
	}
	return w
}

// notBelow reports a ≥ b allowing for float rounding.
func notBelow(a, b float64) bool { return a >= b*(1-1e-12)-1e-300 }

func TestWorkloadCostMonotone(t *testing.T) {
	rng, seed := testRand(t)
	p := S3Express2025()
	cost := func(w Workload) Estimate {
		e, err := WorkloadCost(p, w)
		require.NoError(t, err, "seed %d: %+v", seed, w)
		return e
	}
	for i := range 400 {
		w := randomWorkload(rng)
		base := cost(w)
		at := base.PerSecond.ActiveTier.TotalUSD
		check := func(what string, mod func(*Workload), cheaper bool) {
			t.Helper()
			v := w
			mod(&v)
			got := cost(v).PerSecond.ActiveTier.TotalUSD
			if cheaper {
				assert.True(t, notBelow(at, got), "case %d, seed %d: %s made activetier dearer: %g -> %g\n%+v", i, seed, what, at, got, w)
			} else {
				assert.True(t, notBelow(got, at), "case %d, seed %d: %s made activetier cheaper: %g -> %g\n%+v", i, seed, what, at, got, w)
			}
		}
		if w.MaxObjectBytes == 0 {
			// A binding size cap fixes objects/s at BytesPerSecond/cap; more
			// leaders then make each object hold fewer partitions and be read
			// by fewer followers, which is cheaper. Without a cap, more
			// brokers are never cheaper: BreakEvenBrokers relies on it.
			check("more brokers", func(v *Workload) { v.Brokers += 1 + rng.IntN(50) }, false)
		}
		check("more partitions", func(v *Workload) { v.Partitions += 1 + rng.IntN(500) }, false)
		check("more ranges per follower", func(v *Workload) { v.RangesPerFollower = max(1, v.RangesPerFollower) + 1 }, false)
		check("more followers per object", func(v *Workload) {
			e := cost(*v)
			v.FollowersPerObject = math.Min(float64(v.Brokers-1), e.FollowersPerObject+1)
		}, false)
		check("a smaller object cap", func(v *Workload) {
			if v.MaxObjectBytes == 0 {
				v.MaxObjectBytes = int64(v.BytesPerSecond / float64(cost(*v).Workload.Leaders) * v.FlushInterval.Seconds())
			}
			v.MaxObjectBytes = max(1, v.MaxObjectBytes/2)
		}, false)
		check("bigger metadata entries", func(v *Workload) { v.MetadataEntryBytes = 64 }, false)
		check("no batch-size information", func(v *Workload) { v.BatchBytes = 0 }, false)
		check("a longer flush interval", func(v *Workload) { v.FlushInterval += time.Duration(rng.Int64N(int64(time.Second))) }, true)
		check("larger producer batches", func(v *Workload) { v.BatchBytes = max(v.BatchBytes, 100) * 2 }, true)

		// The break-even search's premise: savings per produced byte never
		// fall as throughput grows.
		v := w
		v.BytesPerSecond *= 1 + rng.Float64()
		perByte := base.PerSecond.SavingsUSD / w.BytesPerSecond
		grown := cost(v).PerSecond.SavingsUSD / v.BytesPerSecond
		assert.True(t, grown >= perByte-1e-12*math.Abs(perByte), "case %d, seed %d: savings per byte fell %g -> %g\n%+v", i, seed, perByte, grown, w)
	}
}

func TestWorkloadCostIsFiniteOrAnError(t *testing.T) {
	for _, w := range []Workload{
		{BytesPerSecond: 1e-300, Partitions: 1, Brokers: 2, RF: 2, FlushInterval: 1},
		{BytesPerSecond: 1e300, Partitions: 1 << 30, Brokers: 1 << 30, RF: 2, FlushInterval: math.MaxInt64},
		{BytesPerSecond: 1e-300, Partitions: 1, Brokers: 2, RF: 2, FlushInterval: 1, BatchBytes: 1e300},
		{BytesPerSecond: 1, Partitions: 1, Brokers: 2, RF: 2, FlushInterval: 1, BatchBytes: 1e-300},
		{BytesPerSecond: 1e308, Partitions: 1, Brokers: 2, RF: 2, FlushInterval: time.Second, Retention: math.MaxInt64},
	} {
		e, err := WorkloadCost(S3Express2025(), w)
		if err != nil {
			assert.ErrorIs(t, err, ErrInvalid)
			continue
		}
		requireFinite(t, e)
	}
}

func requireFinite(t *testing.T, e Estimate) {
	t.Helper()
	for _, c := range []Comparison{e.PerSecond, e.PerMonth()} {
		for _, b := range []Breakdown{c.ActiveTier, c.BrokerToBroker} {
			for _, x := range []float64{b.PutUSD, b.GetUSD, b.UploadUSD, b.RetrievalUSD, b.StorageUSD,
				b.MetadataUSD, b.ControlUSD, b.ReplicationUSD, b.TotalUSD} {
				require.False(t, math.IsNaN(x) || math.IsInf(x, 0), "%+v", e)
				require.GreaterOrEqual(t, x, 0.0)
			}
		}
		require.False(t, math.IsNaN(c.SavingsRatio) || math.IsInf(c.SavingsRatio, 0), "%+v", e)
	}
	for _, x := range []float64{e.ObjectsPerSecond, e.GetsPerSecond, e.ObjectBytes, e.GetBytes,
		e.SectionsPerObject, e.FollowersPerObject, e.RangesPerFollower, e.MetadataCrossAZBytesPerSecond} {
		require.False(t, math.IsNaN(x) || math.IsInf(x, 0), "%+v", e)
	}
}
