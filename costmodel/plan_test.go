package costmodel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lagAt(t *testing.T, w Workload, l Latency, interval time.Duration) Lag {
	t.Helper()
	w.FlushInterval = interval
	lag, err := WorkloadLag(w, l)
	require.NoError(t, err)
	return lag
}

func savingsAt(t *testing.T, p Prices, w Workload, interval time.Duration) float64 {
	t.Helper()
	w.FlushInterval = interval
	e, err := WorkloadCost(p, w)
	require.NoError(t, err)
	return e.PerSecond.SavingsUSD
}

func TestPlanHundredMBps(t *testing.T) {
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3}
	plan, err := PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: 150 * time.Millisecond})
	require.NoError(t, err)
	t.Log(plan.Reason)

	assert.True(t, plan.MeetsBudget)
	assert.True(t, plan.Pays)
	assert.LessOrEqual(t, plan.Lag.P99, 150*time.Millisecond)
	assert.Greater(t, lagAt(t, w, S3ExpressLatency(), plan.FlushInterval+time.Millisecond).P99, 150*time.Millisecond,
		"the plan is the longest whole-millisecond interval within budget")
	assert.Equal(t, plan.FlushInterval, plan.Estimate.CutInterval, "the cap does not bind at the planned rate")
	assert.GreaterOrEqual(t, float64(plan.MaxObjectBytes), plan.Estimate.ObjectBytes)
	assert.Less(t, float64(plan.MaxObjectBytes), plan.Estimate.ObjectBytes+1024)
	assert.LessOrEqual(t, plan.BreakEvenFlushInterval, plan.FlushInterval)
	assert.Greater(t, plan.Estimate.PerSecond.SavingsRatio, 0.8)
	assert.Contains(t, plan.Reason, "within the 150ms budget")
	assert.Contains(t, plan.Reason, "saves")

	// A shorter interval would cost more; a looser budget buys a longer one.
	assert.Less(t, savingsAt(t, S3Express2025(), w, plan.FlushInterval/2), plan.Estimate.PerSecond.SavingsUSD)
	loose, err := PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: 500 * time.Millisecond})
	require.NoError(t, err)
	assert.Greater(t, loose.FlushInterval, plan.FlushInterval)
	assert.Greater(t, loose.Estimate.PerSecond.SavingsUSD, plan.Estimate.PerSecond.SavingsUSD)
}

func TestPlanDoesNotPayForManyBrokersAndSmallObjects(t *testing.T) {
	// The saving shrinks and turns negative as a cluster grows in brokers
	// and partitions (docs/design.md, "Worked cost examples from the
	// KIP-1176 discussion"). 1 MB/s over
	// 1000 partitions led by 100 brokers: each object is ~1 KB, read by ~18
	// followers, and PUTs cost far more than the cross-AZ bytes they save.
	w := Workload{BytesPerSecond: 1e6, Partitions: 1000, Brokers: 100, RF: 3}
	plan, err := PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: 150 * time.Millisecond})
	require.NoError(t, err)
	t.Log(plan.Reason)

	assert.True(t, plan.MeetsBudget)
	assert.False(t, plan.Pays)
	assert.Negative(t, plan.Estimate.PerSecond.SavingsUSD)
	assert.Contains(t, plan.Reason, "does not pay")
	assert.Contains(t, plan.Reason, "PUT requests")
	assert.Contains(t, plan.Reason, "breaks even from a flush interval of "+plan.BreakEvenFlushInterval.String())

	be := plan.BreakEvenFlushInterval
	require.Greater(t, be, plan.FlushInterval)
	assert.GreaterOrEqual(t, savingsAt(t, S3Express2025(), w, be), 0.0)
	assert.Negative(t, savingsAt(t, S3Express2025(), w, be-time.Millisecond))
}

func TestPlanNeverPaysWhenBytesCostMoreThanCrossAZ(t *testing.T) {
	// A negotiated cross-AZ price of $0.001/GB each way is below S3
	// Express's upload and retrieval fees: no object size helps.
	p := S3Express2025()
	p.CrossAZOutPerGB, p.CrossAZInPerGB = 0.001, 0.001
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3}
	plan, err := PlanWorkload(p, PlanRequest{Workload: w, P99Lag: 150 * time.Millisecond})
	require.NoError(t, err)
	t.Log(plan.Reason)
	assert.False(t, plan.Pays)
	assert.Zero(t, plan.BreakEvenFlushInterval)
	assert.Contains(t, plan.Reason, "no object size makes it pay")
	assert.Contains(t, plan.Reason, "upload fees")
}

func TestPlanNoIntervalBreaksEven(t *testing.T) {
	// 1 KB/s over 1000 partitions and 100 brokers: even 10 s objects are
	// 100 bytes, and requests outweigh anything saved.
	w := Workload{BytesPerSecond: 1e3, Partitions: 1000, Brokers: 100, RF: 3}
	plan, err := PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: time.Minute})
	require.NoError(t, err)
	t.Log(plan.Reason)
	assert.Equal(t, DefaultMaxFlushInterval, plan.FlushInterval)
	assert.False(t, plan.Pays)
	assert.Zero(t, plan.BreakEvenFlushInterval)
	assert.Contains(t, plan.Reason, "at the longest interval considered")
	assert.Contains(t, plan.Reason, "no flush interval up to 10s breaks even")
}

func TestPlanBudgetBelowTheLatencyFloor(t *testing.T) {
	// PUT + GET + metadata alone take ~15 ms at the median.
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3}
	plan, err := PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Log(plan.Reason)
	assert.False(t, plan.MeetsBudget)
	assert.Equal(t, MinFlushInterval, plan.FlushInterval)
	assert.Greater(t, plan.Lag.P99, 10*time.Millisecond)
	assert.Contains(t, plan.Reason, "no flush interval meets the 10ms p99 budget")
}

func TestPlanRespectsTheWorkloadsLimits(t *testing.T) {
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 20 * time.Millisecond}
	plan, err := PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: time.Second})
	require.NoError(t, err)
	assert.Equal(t, 20*time.Millisecond, plan.FlushInterval)
	assert.Contains(t, plan.Reason, "longest interval considered")

	w = Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3, MaxObjectBytes: 256 << 10}
	plan, err = PlanWorkload(S3Express2025(), PlanRequest{Workload: w, P99Lag: time.Second})
	require.NoError(t, err)
	assert.LessOrEqual(t, plan.MaxObjectBytes, int64(256<<10))
	assert.LessOrEqual(t, plan.Estimate.ObjectBytes, float64(256<<10)*(1+1e-9))
	assert.Less(t, plan.Estimate.CutInterval, plan.FlushInterval, "cut by size, not time")
}

func TestPlanOnS3Standard(t *testing.T) {
	// No per-byte fees: S3 Standard saves more, if a second of lag is fine.
	w := Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3}
	plan, err := PlanWorkload(S3Standard2025(), PlanRequest{Workload: w, P99Lag: time.Second, Latency: S3StandardLatency()})
	require.NoError(t, err)
	t.Log(plan.Reason)
	assert.True(t, plan.MeetsBudget)
	assert.True(t, plan.Pays)
	assert.Greater(t, plan.Estimate.PerSecond.SavingsRatio, 0.95)
	assert.Greater(t, plan.Lag.PutMedian, 60*time.Millisecond)
}

func TestPlanRejectsBadInput(t *testing.T) {
	valid := func() (Prices, PlanRequest) {
		return S3Express2025(), PlanRequest{
			Workload: Workload{BytesPerSecond: 1e6, Partitions: 10, Brokers: 3, RF: 3}, P99Lag: time.Second}
	}
	for _, tc := range []struct {
		field string
		mod   func(*Prices, *PlanRequest)
	}{
		{"PlanRequest.P99Lag", func(_ *Prices, r *PlanRequest) { r.P99Lag = 0 }},
		{"Workload.RF", func(_ *Prices, r *PlanRequest) { r.Workload.RF = 1 }},
		{"Workload.BytesPerSecond", func(_ *Prices, r *PlanRequest) { r.Workload.BytesPerSecond = -1 }},
		{"Workload.FlushInterval", func(_ *Prices, r *PlanRequest) { r.Workload.FlushInterval = -time.Second }},
		{"Workload.FlushInterval", func(_ *Prices, r *PlanRequest) { r.Workload.FlushInterval = time.Microsecond }},
		{"Workload.MaxObjectBytes", func(_ *Prices, r *PlanRequest) { r.Workload.MaxObjectBytes = 6 << 30 }},
		{"Latency.PutSigma", func(_ *Prices, r *PlanRequest) { r.Latency = S3ExpressLatency(); r.Latency.PutSigma = -1 }},
		{"Prices.PutPer1000", func(p *Prices, _ *PlanRequest) { p.PutPer1000 = -1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			p, r := valid()
			tc.mod(&p, &r)
			_, err := PlanWorkload(p, r)
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}
