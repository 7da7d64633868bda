package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
)

// costJSON runs `cost --json` with args and decodes the report.
func costJSON(t *testing.T, args ...string) costReport {
	t.Helper()
	r := runCmd(t, "", append([]string{"cost", "--json"}, args...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	var rep costReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep), r.stdout)
	return rep
}

// The command prints what the cost model computes for the workload the
// flags describe, no more and no less.
func TestCostMatchesModel(t *testing.T) {
	rep := costJSON(t, "--mb-per-sec", "50", "--partitions", "600", "--brokers", "6", "--rf", "3",
		"--interval", "200ms", "--object-bytes", "8MiB", "--batch-bytes", "16KB", "--retention", "10m")
	want, err := costmodel.WorkloadCost(costmodel.S3Express2025(), costmodel.Workload{
		BytesPerSecond: 50e6, Partitions: 600, Brokers: 6, RF: 3, FlushInterval: 200 * time.Millisecond,
		MaxObjectBytes: 8 << 20, BatchBytes: 16e3, Retention: 10 * time.Minute,
	})
	require.NoError(t, err)
	month := want.PerMonth()
	assert.Equal(t, "month", rep.Period)
	assert.Equal(t, month.ActiveTier.TotalUSD, rep.Cost.ActiveTier.TotalUSD)
	assert.Equal(t, month.BrokerToBroker.TotalUSD, rep.Cost.BrokerToBroker.TotalUSD)
	assert.Equal(t, month.SavingsUSD, rep.Cost.SavingsUSD)
	assert.Equal(t, month.ActiveTier.StorageUSD, rep.Cost.ActiveTier.StorageUSD)
	assert.Positive(t, rep.Cost.ActiveTier.StorageUSD, "--retention prices storage")
	assert.Equal(t, want.PutsPerSecond, rep.Rates.PutsPerSecond)
	assert.Equal(t, want.GetsPerSecond, rep.Rates.GetsPerSecond)
	assert.Equal(t, 6, rep.Workload.Leaders, "leaders derived")
	assert.Equal(t, int64(8<<20), rep.Workload.MaxObjectBytes)
	assert.Equal(t, "s3express-2025", rep.Prices.Name)
	assert.Equal(t, "like for like: objects and broker-to-broker replication priced on the same 50.0 MB/s, "+
		"the batches as producers sent them (compressed or not)", rep.Comparison)
	// The same bytes on both sides: what objects upload and what brokers
	// would send every follower.
	assert.Equal(t, rep.Rates.UploadBytesPerSecond*float64(rep.Workload.RF-1), rep.Rates.ReplicationBytesPerSecond)
	require.NotNil(t, rep.BreakEvenMBPerSec)
	assert.Less(t, *rep.BreakEvenMBPerSec, 50.0, "the workload pays, so it breaks even below its throughput")

	perSecond := costJSON(t, "--mb-per-sec", "50", "--partitions", "600", "--brokers", "6", "--rf", "3",
		"--interval", "200ms", "--object-bytes", "8MiB", "--batch-bytes", "16KB", "--retention", "10m", "--per", "second")
	assert.InEpsilon(t, rep.Cost.ActiveTier.TotalUSD, perSecond.Cost.ActiveTier.TotalUSD*costmodel.SecondsPerMonth, 1e-12)
}

func TestCostTable(t *testing.T) {
	r := runCmd(t, "", "cost")
	require.Equal(t, exitOK, r.code, r.stderr)
	est, err := costmodel.WorkloadCost(costmodel.S3Express2025(), costmodel.Workload{
		BytesPerSecond: 30e6, Partitions: 300, Brokers: 3, RF: 3, FlushInterval: 250 * time.Millisecond,
	})
	require.NoError(t, err)
	m := est.PerMonth()
	for _, want := range []string{
		"30.0 MB/s over 300 partitions on 3 leaders, RF 3, 3 brokers",
		"s3express-2025",
		"per month",
		"PUT requests",
		"replication (cross-AZ)",
		usd(m.ActiveTier.TotalUSD),
		usd(m.BrokerToBroker.TotalUSD),
		"activetier saves " + usd(m.SavingsUSD) + " per month",
		// Both sides are priced on the same bytes, and the report says so.
		"\ncomparison        like for like: objects and broker-to-broker replication priced on the same 30.0 MB/s, " +
			"the batches as producers sent them (compressed or not)\n",
	} {
		assert.Contains(t, r.stdout, want)
	}
	assert.NotContains(t, r.stdout, "why:", "no plan was asked for")
}

func TestCostPriceOverrides(t *testing.T) {
	rep := costJSON(t, "--cross-az-per-gb", "0.01", "--cross-az-in-per-gb", "0", "--put-per-1000", "0.002",
		"--get-per-1000", "0.0001", "--upload-per-gb", "0", "--retrieval-per-gb", "0.001", "--storage-per-gb-month", "0.2", "--gib")
	assert.Equal(t, pricesJSON{
		Name: "s3express-2025 (overridden)", PutPer1000: 0.002, GetPer1000: 0.0001, UploadPerGB: 0,
		RetrievalPerGB: 0.001, StoragePerGBMonth: 0.2, CrossAZOutPerGB: 0.01, CrossAZInPerGB: 0, BytesPerGB: costmodel.BinaryGB,
	}, rep.Prices)

	// Free cross-AZ traffic leaves activetier nothing to save.
	r := runCmd(t, "", "cost", "--cross-az-per-gb", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "activetier does NOT pay")
	assert.Contains(t, r.stdout, "no break-even point")

	std := costJSON(t, "--preset", "s3standard")
	assert.Equal(t, costmodel.S3Standard2025().Name, std.Prices.Name)
	assert.Zero(t, std.Cost.ActiveTier.UploadUSD, "S3 Standard has no upload fee")
}

func TestCostPlan(t *testing.T) {
	rep := costJSON(t, "--plan", "--latency-budget", "150ms")
	want, err := costmodel.PlanWorkload(costmodel.S3Express2025(), costmodel.PlanRequest{
		Workload: costmodel.Workload{BytesPerSecond: 30e6, Partitions: 300, Brokers: 3, RF: 3},
		P99Lag:   150 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NotNil(t, rep.Plan)
	assert.True(t, rep.Plan.MeetsBudget)
	assert.True(t, rep.Plan.Pays)
	assert.Equal(t, ms(want.FlushInterval), rep.Plan.FlushIntervalMS)
	assert.Equal(t, want.MaxObjectBytes, rep.Plan.MaxObjectBytes)
	assert.LessOrEqual(t, rep.Plan.LagP99MS, 150.0)
	assert.Equal(t, want.Reason, rep.Plan.Reason)
	assert.Equal(t, want.Estimate.PerMonth().ActiveTier.TotalUSD, rep.Cost.ActiveTier.TotalUSD)

	// --interval given with --plan is the longest interval considered.
	capped := costJSON(t, "--plan", "--latency-budget", "150ms", "--interval", "20ms")
	assert.Equal(t, 20.0, capped.Plan.FlushIntervalMS)
}

// With waiters, the plan prices the PUTs their cuts add, as the model does,
// and the table states the rate with and without them and the assumption.
func TestCostPlanWithWaiters(t *testing.T) {
	args := []string{"--plan", "--interval", "100ms", "--batch-bytes", "16KB", "--wait-fraction", "0.1", "--wait-cut-delay", "2ms"}
	rep := costJSON(t, args...)
	want, err := costmodel.PlanWorkload(costmodel.S3Express2025(), costmodel.PlanRequest{
		Workload: costmodel.Workload{BytesPerSecond: 30e6, Partitions: 300, Brokers: 3, RF: 3, BatchBytes: 16e3,
			FlushInterval: 100 * time.Millisecond, WaitFraction: 0.1, WaitCutDelay: 2 * time.Millisecond},
		P99Lag: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NotNil(t, rep.Plan)
	assert.Equal(t, want.Estimate.PutsPerSecond, rep.Rates.PutsPerSecond)
	assert.Equal(t, want.Estimate.PutsPerSecondWithoutWaits, rep.Rates.PutsPerSecondWithoutWaits)
	assert.Greater(t, rep.Rates.PutsPerSecond, rep.Rates.PutsPerSecondWithoutWaits, "waiters add PUTs")
	assert.LessOrEqual(t, rep.Rates.PutsPerSecond, 3/0.002, "at most one per bound per leader")
	assert.Equal(t, 0.1, rep.Workload.WaitFraction)
	assert.Equal(t, 2.0, rep.Workload.WaitCutDelayMS)
	assert.Equal(t, want.Estimate.PerMonth().ActiveTier.PutUSD, rep.Cost.ActiveTier.PutUSD)

	r := runCmd(t, "", append([]string{"cost"}, args...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "waiters")
	assert.Contains(t, r.stdout, "0.1 of appends wait, cut within 2ms: "+rateString(want.Estimate.PutsPerSecond)+" PUTs/s, "+
		rateString(want.Estimate.PutsPerSecondWithoutWaits)+" without waiters (at most 1,500: 1/2ms per leader)")
	assert.Contains(t, r.stdout, "assumes Poisson appends of --batch-bytes, each waited for with probability 0.1")

	bad := runCmd(t, "", "cost", "--interval", "100ms", "--wait-fraction", "0.1", "--wait-cut-delay", "200ms")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, "--wait-cut-delay 200ms: must not exceed the flush interval")
}

// The scaling worry of docs/design.md, "Worked cost examples from the
// KIP-1176 discussion": with many brokers and little traffic, requests and
// metadata cost more than the cross-AZ bytes saved. The plan says so, and
// where it would break even.
func TestCostPlanDoesNotPay(t *testing.T) {
	r := runCmd(t, "", "cost", "--plan", "--brokers", "30", "--mb-per-sec", "1", "--partitions", "3000", "--latency-budget", "50ms")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, want := range []string{"pays                 NO", "activetier does NOT pay", "why: ", "does not pay", "breaks even from a flush interval of"} {
		assert.Contains(t, r.stdout, want)
	}
	rep := costJSON(t, "--plan", "--brokers", "30", "--mb-per-sec", "1", "--partitions", "3000", "--latency-budget", "50ms")
	assert.False(t, rep.Plan.Pays)
	assert.Negative(t, rep.Cost.SavingsUSD)
	assert.Positive(t, rep.Plan.BreakEvenFlushIntervalMS)
}

// A budget no interval meets is an answer, not an error.
func TestCostPlanUnmeetableBudget(t *testing.T) {
	r := runCmd(t, "", "cost", "--plan", "--latency-budget", "2ms")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "budget 2ms NOT met")
	assert.Contains(t, r.stdout, "no flush interval meets the 2ms p99 budget")

	slow := costJSON(t, "--plan", "--preset", "s3standard", "--latency-budget", "500ms")
	fast := costJSON(t, "--plan", "--latency-budget", "500ms")
	assert.Less(t, slow.Plan.FlushIntervalMS, fast.Plan.FlushIntervalMS, "S3 Standard's slower requests leave less of the budget for waiting")
}

func TestUSD(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "$0"}, {2.09e-6, "$2.09e-6"}, {-6e-6, "-$6.00e-6"}, {0.0123, "$0.0123"}, {0.5, "$0.5"},
		{1.234, "$1.23"}, {999.994, "$999.99"}, {3154.2, "$3,154"}, {-1234567, "-$1,234,567"},
		// Beyond what an int64 holds, no wrapped integers.
		{999_999_999_999_999_900, "$999,999,999,999,999,872"}, {1e18, "$1.00e18"}, {9.3e18, "$9.30e18"},
		{-6.9e24, "-$6.90e24"}, {math.MaxFloat64, "$1.80e308"},
	} {
		assert.Equal(t, tc.want, usd(tc.in), "%g", tc.in)
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false}, {"4194304", 4 << 20, false}, {"4MiB", 4 << 20, false}, {"1.5MB", 1_500_000, false},
		{"512 KiB", 512 << 10, false}, {"2GB", 2e9, false}, {"7B", 7, false},
		{"-1", 0, true}, {"MiB", 0, true}, {"4 MiBs", 0, true}, {"NaN", 0, true}, {"1e30", 0, true},
	} {
		got, err := parseBytes(tc.in)
		if tc.err {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	b := byteSize(4 << 20)
	assert.Equal(t, "4MiB", b.String())
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.00 KB"}, {12_345, "12.3 KB"}, {99_960_000, "100 MB"},
		{9_996_000, "10.0 MB"}, {123_456_789, "123 MB"}, {2.5e9, "2.50 GB"}, {4e12, "4.00 TB"},
	} {
		assert.Equal(t, tc.want, humanBytes(tc.in), "%g", tc.in)
	}
}

// The filesystem price list charges nothing per request or byte moved,
// and the report says what it leaves out, in the table and in JSON.
func TestCostFilesystemPreset(t *testing.T) {
	rep := costJSON(t, "--preset", "filesystem")
	assert.Equal(t, "filesystem", rep.Prices.Name)
	assert.Equal(t, costmodel.Filesystem().Note, rep.Prices.Note)
	at := rep.Cost.ActiveTier
	assert.Zero(t, at.PutUSD+at.GetUSD+at.UploadUSD+at.RetrievalUSD+at.StorageUSD)
	assert.Positive(t, at.MetadataUSD)
	assert.Empty(t, costJSON(t).Prices.Note, "the S3 lists need no note")

	r := runCmd(t, "", "cost", "--preset", "filesystem")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "prices            filesystem\n                  a file system bills no requests;")
}
