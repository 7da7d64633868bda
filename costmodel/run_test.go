package costmodel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// objectOf100Partitions is the 0.3 MB / 100-partition example of
// docs/design.md, "Worked cost examples from the KIP-1176 discussion": 0.3 MB
// of 100 partitions in one object, one PUT, read 100 times (one follower per
// partition, all distinct).
func objectOf100Partitions(rf int) Usage {
	copies := int64(rf - 1)
	return Usage{Puts: 1, Gets: 100 * copies, BytesUp: 300_000, BytesDown: 300_000 * copies, ProducedBytes: 300_000, RF: rf}
}

func TestRunCostReproduces300KBObjectOf100Partitions(t *testing.T) {
	c, err := RunCost(S3Express2025(), objectOf100Partitions(2))
	require.NoError(t, err)
	at, b2b := c.ActiveTier, c.BrokerToBroker

	// Write: one PUT, $1.13e-6, plus the upload, $0.96e-6.
	assert.InEpsilon(t, 1.13e-6, at.PutUSD, exact)
	assert.InEpsilon(t, 0.96e-6, at.UploadUSD, exact)
	assert.InEpsilon(t, 2.09e-6, at.WriteUSD(), exact)
	// Read: 100 GETs, $3e-6, plus the retrieval, $0.18e-6.
	assert.InEpsilon(t, 3e-6, at.GetUSD, exact)
	assert.InEpsilon(t, 0.18e-6, at.RetrievalUSD, exact)
	assert.InEpsilon(t, 3.18e-6, at.ReadUSD(), exact)
	// Together $5.27e-6.
	assert.InEpsilon(t, 5.27e-6, at.TotalUSD, exact)
	// Broker to broker: 0.3 MB at $0.01/GB out and $0.01/GB in, $6e-6.
	assert.InEpsilon(t, 6e-6, b2b.ReplicationUSD, exact)
	assert.InEpsilon(t, 6e-6, b2b.TotalUSD, exact)
	// About 12% saved.
	assert.InEpsilon(t, 0.73e-6, c.SavingsUSD, 1e-8)
	assert.InEpsilon(t, 0.73/6, c.SavingsRatio, 1e-8)
	assert.Zero(t, at.ReplicationUSD+at.MetadataUSD+at.ControlUSD+at.StorageUSD)
}

func TestRunCost300KBExampleNeedsDecimalGigabytes(t *testing.T) {
	// The example's $0.96e-6 upload is 3e5/1e9·$0.0032. With AWS's binary
	// GB the same bytes cost 6.9% less, and the example no longer
	// reproduces.
	p := S3Express2025()
	p.BytesPerGB = BinaryGB
	c, err := RunCost(p, objectOf100Partitions(2))
	require.NoError(t, err)
	assert.InEpsilon(t, 0.96e-6*1e9/(1<<30), c.ActiveTier.UploadUSD, exact)
	assert.NotEqual(t, 2.09e-6, c.ActiveTier.WriteUSD())
	assert.InEpsilon(t, 1.13e-6, c.ActiveTier.PutUSD, exact, "request prices do not depend on the byte unit")
}

func TestRunCost300KBExampleAtRF3ReadsTwice(t *testing.T) {
	// The KIP-1176 discussion put RF=3 at $1.2e-5 broker to broker and
	// about 56% saved (1 - 5.27/12). But at RF=3 each partition has two
	// followers, so the object is read twice as often: 200 GETs and 0.6 MB
	// retrieved.
	c, err := RunCost(S3Express2025(), objectOf100Partitions(3))
	require.NoError(t, err)
	assert.InEpsilon(t, 1.2e-5, c.BrokerToBroker.TotalUSD, exact)
	assert.InEpsilon(t, 2.09e-6, c.ActiveTier.WriteUSD(), exact)
	assert.InEpsilon(t, 6.36e-6, c.ActiveTier.ReadUSD(), exact)
	assert.InEpsilon(t, 8.45e-6, c.ActiveTier.TotalUSD, exact)
	assert.InEpsilon(t, 1-8.45/12, c.SavingsRatio, 1e-8) // 29.6%, not 56%
}

func TestRunCost300KBExampleBreaksEvenAtOnePutPer125Gets(t *testing.T) {
	// At RF=2 activetier breaks even at one PUT per 125 GETs: true of a
	// 0.3 MB object, where the crossing is at 124.33 GETs.
	for _, tc := range []struct {
		gets int64
		pays bool
	}{{100, true}, {124, true}, {125, false}, {200, false}} {
		u := objectOf100Partitions(2)
		u.Gets = tc.gets
		c, err := RunCost(S3Express2025(), u)
		require.NoError(t, err)
		assert.Equal(t, tc.pays, c.SavingsUSD > 0, "%d GETs: savings %g", tc.gets, c.SavingsUSD)
	}
}

func TestRunCostMetadataBroadcast(t *testing.T) {
	// The 3 KB metadata broadcast (docs/design.md, "Worked cost examples
	// from the KIP-1176 discussion"): 3 MB over 100 partitions; a 3 KB
	// metadata message (30 bytes per partition) read by every one of 100
	// brokers is 300 KB of metadata, a 20:1 ratio of data to metadata.
	u := Usage{Puts: 1, Gets: 100, BytesUp: 3_000_000, BytesDown: 3_000_000,
		MetadataBytes: 100 * 100 * 30, ProducedBytes: 3_000_000, RF: 2}
	assert.Equal(t, int64(20), (u.BytesUp+u.BytesDown)/u.MetadataBytes)

	c, err := RunCost(S3Express2025(), u)
	require.NoError(t, err)
	at := c.ActiveTier
	assert.InEpsilon(t, 1.13e-6+9.6e-6, at.WriteUSD(), exact)
	assert.InEpsilon(t, 3e-6+1.8e-6, at.ReadUSD(), exact)
	// The metadata crosses AZs at EC2 prices: 300 KB · $0.02/GB.
	assert.InEpsilon(t, 6e-6, at.MetadataUSD, exact)
	assert.InEpsilon(t, 2.153e-5, at.TotalUSD, exact)
	assert.InEpsilon(t, 6e-5, c.BrokerToBroker.TotalUSD, exact)
	assert.InEpsilon(t, 1-2.153/6, c.SavingsRatio, 1e-8)

	// The same 300 KB of metadata for a 0.3 MB object. Broadcast metadata
	// alone costs as much as the replication it replaces, and the savings
	// turn negative.
	u = objectOf100Partitions(2)
	u.MetadataBytes = 300_000
	c, err = RunCost(S3Express2025(), u)
	require.NoError(t, err)
	assert.InEpsilon(t, 6e-6, c.ActiveTier.MetadataUSD, exact)
	assert.InEpsilon(t, 6e-6-11.27e-6, c.SavingsUSD, 1e-8)
	assert.Less(t, c.SavingsRatio, -0.8)

	// With follower-affinity routing each follower reads only its own
	// entry: 100 × 30 bytes, and the savings are back.
	u.MetadataBytes = 100 * 30
	c, err = RunCost(S3Express2025(), u)
	require.NoError(t, err)
	assert.Positive(t, c.SavingsUSD)
}

func TestRunCostControlAndStorage(t *testing.T) {
	u := Usage{ControlBytes: 1_000_000_000, StoredByteSeconds: 1e9 * SecondsPerMonth, RF: 3}
	c, err := RunCost(S3Express2025(), u)
	require.NoError(t, err)
	// Control traffic is on both paths and never moves the savings.
	assert.InEpsilon(t, 0.02, c.ActiveTier.ControlUSD, exact)
	assert.InEpsilon(t, 0.02, c.BrokerToBroker.ControlUSD, exact)
	// One GB held for a month.
	assert.InEpsilon(t, 0.11, c.ActiveTier.StorageUSD, exact)
	assert.InEpsilon(t, -0.11, c.SavingsUSD, exact)
}

func TestRunCostZeroUsageIsZero(t *testing.T) {
	c, err := RunCost(S3Express2025(), Usage{RF: 2})
	require.NoError(t, err)
	assert.Equal(t, Comparison{}, c, "no NaN from 0/0: the ratio of a zero baseline is 0")
}

func TestRunCostRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		field string
		u     Usage
	}{
		{"Usage.Puts", Usage{Puts: -1, RF: 2}},
		{"Usage.Gets", Usage{Gets: -1, RF: 2}},
		{"Usage.BytesUp", Usage{BytesUp: -1, RF: 2}},
		{"Usage.BytesDown", Usage{BytesDown: -1, RF: 2}},
		{"Usage.MetadataBytes", Usage{MetadataBytes: -1, RF: 2}},
		{"Usage.ControlBytes", Usage{ControlBytes: -1, RF: 2}},
		{"Usage.ProducedBytes", Usage{ProducedBytes: -1, RF: 2}},
		{"Usage.StoredByteSeconds", Usage{StoredByteSeconds: -1, RF: 2}},
		{"Usage.RF", Usage{RF: 1}},
		{"Usage.RF", Usage{}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := RunCost(S3Express2025(), tc.u)
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
	p := S3Express2025()
	p.GetPer1000 = -1
	_, err := RunCost(p, objectOf100Partitions(2))
	assert.ErrorContains(t, err, "Prices.GetPer1000")
}

func TestRunCostMonotone(t *testing.T) {
	// More of anything activetier does never makes it cheaper; more
	// produced bytes or a higher RF never makes the baseline cheaper.
	rng, seed := testRand(t)
	grow := []struct {
		name string
		f    func(*Usage, int64)
	}{
		{"Puts", func(u *Usage, d int64) { u.Puts += d }},
		{"Gets", func(u *Usage, d int64) { u.Gets += d }},
		{"BytesUp", func(u *Usage, d int64) { u.BytesUp += d }},
		{"BytesDown", func(u *Usage, d int64) { u.BytesDown += d }},
		{"MetadataBytes", func(u *Usage, d int64) { u.MetadataBytes += d }},
		{"ControlBytes", func(u *Usage, d int64) { u.ControlBytes += d }},
		{"StoredByteSeconds", func(u *Usage, d int64) { u.StoredByteSeconds += float64(d) }},
	}
	for i := range 500 {
		u := Usage{
			Puts: rng.Int64N(1e6), Gets: rng.Int64N(1e8), BytesUp: rng.Int64N(1e12), BytesDown: rng.Int64N(1e12),
			MetadataBytes: rng.Int64N(1e9), ControlBytes: rng.Int64N(1e9), ProducedBytes: rng.Int64N(1e12),
			StoredByteSeconds: rng.Float64() * 1e15, RF: 2 + rng.IntN(4),
		}
		base, err := RunCost(S3Express2025(), u)
		require.NoError(t, err)
		for _, g := range grow {
			v := u
			g.f(&v, 1+rng.Int64N(1e6))
			c, err := RunCost(S3Express2025(), v)
			require.NoError(t, err)
			assert.Greater(t, c.ActiveTier.TotalUSD, base.ActiveTier.TotalUSD,
				"case %d: more %s must cost more (seed %d)", i, g.name, seed)
		}
		v := u
		v.ProducedBytes += 1 + rng.Int64N(1e6)
		c, err := RunCost(S3Express2025(), v)
		require.NoError(t, err)
		assert.Greater(t, c.BrokerToBroker.TotalUSD, base.BrokerToBroker.TotalUSD, "case %d (seed %d)", i, seed)
		v = u
		v.RF++
		c, err = RunCost(S3Express2025(), v)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, c.BrokerToBroker.TotalUSD, base.BrokerToBroker.TotalUSD, "case %d (seed %d)", i, seed)
	}
}

func TestComparisonScale(t *testing.T) {
	c, err := RunCost(S3Express2025(), objectOf100Partitions(2))
	require.NoError(t, err)
	s := c.Scale(1e6)
	assert.InEpsilon(t, 5.27, s.ActiveTier.TotalUSD, exact)
	assert.InEpsilon(t, 6, s.BrokerToBroker.TotalUSD, exact)
	assert.InEpsilon(t, 3.18, s.ActiveTier.ReadUSD(), exact)
	assert.InEpsilon(t, c.SavingsRatio, s.SavingsRatio, exact)
}

func TestHedgeCost(t *testing.T) {
	p := S3Express2025()
	b, err := HedgeCost(p, 10, 1000, 10<<20, 1<<30)
	require.NoError(t, err)
	want := 10*p.PutPer1000/1000 + 1000*p.GetPer1000/1000 + float64(10<<20)*p.UploadPerGB/p.BytesPerGB + float64(1<<30)*p.RetrievalPerGB/p.BytesPerGB
	require.InDelta(t, want, b.TotalUSD, 1e-12)
	require.Equal(t, b.WriteUSD()+b.ReadUSD(), b.TotalUSD, "only the object store lines")
	_, err = HedgeCost(p, -1, 0, 0, 0)
	require.Error(t, err, "a negative count")
	_, err = HedgeCost(Prices{PutPer1000: -1}, 0, 0, 0, 0)
	require.Error(t, err, "invalid prices")
}
