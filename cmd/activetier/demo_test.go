package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
)

// demoJSON runs the demo with --json and decodes its report.
func demoJSON(t *testing.T, args ...string) demoReport {
	t.Helper()
	r := runCmd(t, "", append([]string{"demo", "--json"}, args...)...)
	require.Equal(t, exitOK, r.code, "stderr: %s\nstdout: %s", r.stderr, r.stdout)
	assert.Empty(t, r.stderr, "no progress where nobody looks")
	var rep demoReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep), r.stdout)
	require.False(t, dec.More(), "one JSON object")
	return rep
}

// The acceptance check in small: a short run ends with every follower's
// log equal to its leader's, and cheaper than cross-AZ replication.
func TestDemoJSON(t *testing.T) {
	rep := demoJSON(t, "--duration", "1500ms", "--partitions", "12", "--rate", "2", "--seed", "7")
	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	assert.False(t, rep.DrainTimedOut)
	assert.Equal(t, 24, rep.ReplicasCompared, "12 partitions, 2 followers each")
	assert.Empty(t, rep.Diverged)
	assert.Positive(t, rep.BytesProduced)
	assert.Equal(t, 2*uint64(rep.BytesProduced), rep.BytesReplicated, "every produced byte reaches both followers")
	assert.Positive(t, rep.Puts)
	// One PUT per object and at most one per hedge (a hedge cancelled
	// before it was sent is no request), none retried.
	assert.GreaterOrEqual(t, rep.Puts, int64(rep.Objects))
	assert.LessOrEqual(t, rep.Puts, int64(rep.Objects+rep.HedgedPuts))
	assert.GreaterOrEqual(t, rep.Gets, int64(rep.Objects), "each object is read by at least one follower")
	assert.LessOrEqual(t, int64(rep.HedgedGets), rep.Gets, "hedged GETs are among the GETs")
	assert.LessOrEqual(t, rep.HedgeCostUSD, rep.CostUSD, "hedges are part of the cost")
	assert.Equal(t, rep.HedgedGets+rep.HedgedPuts > 0, rep.HedgeCostUSD > 0, "hedges cost something, and only hedges")
	assert.Positive(t, rep.MetadataBytes)
	assert.Positive(t, rep.LagP50MS)
	assert.GreaterOrEqual(t, rep.LagP99MS, rep.LagP50MS)
	assert.GreaterOrEqual(t, rep.LagMaxMS, rep.LagP99MS)
	assert.Positive(t, rep.CostUSD)
	// At 2 MB/s an object's PUT carries little, so against producers that
	// compress as the sections do activetier need not be cheaper; against
	// the uncompressed batches it is.
	assert.Positive(t, rep.SavingsRatioUncompressed)
	assert.Less(t, rep.SavingsRatio, rep.SavingsRatioUncompressed)
	assert.Equal(t, rep.Cost.ActiveTier.TotalUSD, rep.CostUSD)
	assert.Equal(t, "zstd", rep.Codec)
	assert.Nil(t, rep.Failover)
}

// Taking an AZ down halfway: its broker crashes, the partitions it led move
// to survivors at the next epoch, and the survivors still end identical.
func TestDemoFailAZ(t *testing.T) {
	rep := demoJSON(t, "--duration", "2s", "--partitions", "12", "--rate", "2", "--fail-az", "az1", "--seed", "3")
	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	require.NotNil(t, rep.Failover)
	fo := rep.Failover
	assert.Equal(t, "az1", fo.AZ)
	assert.Equal(t, []int32{1}, fo.CrashedBrokers)
	assert.Equal(t, 4, fo.PartitionsMoved, "broker 1 led every third partition")
	assert.Equal(t, int32(1), fo.NewEpoch)
	// Halfway at the earliest; how much later depends on the machine's
	// load, which a test must not assert on.
	assert.GreaterOrEqual(t, fo.AtS, 1.0)
	// Broker 1 followed 8 partitions and led 4; every partition keeps one
	// live follower.
	assert.Equal(t, 12, rep.ReplicasCompared)
	// At 2 MB/s, like for like, activetier need not be cheaper (see
	// TestDemoJSON); against the uncompressed batches it is.
	assert.Positive(t, rep.SavingsRatioUncompressed)
}

// Followers that have not caught up when the drain ends make the run fail:
// the report says which logs differ, and the command exits 1. Stopping the
// drain at once guarantees it, since the leaders still hold the last
// interval's batches.
func TestDemoInconsistentExitsOne(t *testing.T) {
	r := runCmd(t, "", "demo", "--json", "--duration", "500ms", "--partitions", "6", "--rate", "2", "--drain-timeout", "1ns")
	assert.Equal(t, exitFailure, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	assert.Contains(t, r.stderr, "activetier demo: ")
	assert.Contains(t, r.stderr, "follower logs differ from their leader's (first: topic")
	assert.Contains(t, r.stderr, "still catching up when --drain-timeout 1ns ran out", "a drain that timed out is said to have")
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "the report is printed before the verdict")
	assert.False(t, rep.FollowersConsistent)
	assert.True(t, rep.DrainTimedOut)
	assert.Positive(t, rep.ReplicasDiverged)
	assert.LessOrEqual(t, len(rep.Diverged), maxDiverged)
	assert.Len(t, rep.Diverged, min(rep.ReplicasDiverged, maxDiverged))
}

// Without --json the report is a table, preceded by a progress line per
// second since the output is not a terminal.
func TestDemoText(t *testing.T) {
	r := runCmd(t, "", "demo", "--duration", "2200ms", "--partitions", "6", "--rate", "1", "--profile", "none", "--codec", "s2", "--fail-az", "az3")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	for _, want := range []string{
		"activetier demo: 3 brokers in 3 AZs, 4 topics, 6 partitions at RF 3, 1.00 MB/s for 2.2s; none latency, s2 sections",
		"   1.0s  ", "   2.0s  ", "produced (",
		"az3 goes down",
		"partitions have new leaders at epoch 1",
		"producing stopped; waiting for followers to catch up",
		"failover    az3 down at 1.1s: broker(s) 3 crashed; 2 partitions led again at epoch 1",
		"consistent  yes: 6 follower logs compared",
		"cost of this run (s3express-2025)",
		"a month at this rate",
		" than replicating the same batches across AZs.\n",
		"(like for like: objects with s2 sections against broker-to-broker batches compressed with s2",
		"\ntopics that cost most ",
		"\ncostliest partitions\n",
	} {
		assert.Contains(t, r.stdout, want)
	}
	assert.Regexp(t, `\nhedged +[0-9,]+ PUTs \([0-9]+% of PUTs\), [0-9,]+ GETs \([0-9]+% of GETs\) sent again while the first was slow: at most \$[0-9.]+, in the cost below\n`, r.stdout)
	// Every topic, with its partitions, its cost and its share of the run's.
	for _, topic := range []string{`topic1 \(2 partitions\)`, `topic2 \(2 partitions\)`, `topic3 \(1 partition\)`, `topic4 \(1 partition\)`} {
		assert.Regexp(t, `\n  `+topic+` +\$[0-9.e-]+ +[0-9.]+%\n`, r.stdout)
	}
	assert.NotContains(t, r.stdout, "\r", "no redrawing outside a terminal")
}

func TestDemoUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "-1"}, "--rate -1: must be a throughput between 0.000001 and 1000000000 MB/s"},
		{[]string{"--rate", "1e300"}, "--rate 1e+300: must be a throughput"},
		{[]string{"--rate", "0"}, "--rate 0:"},
		{[]string{"--duration", "0s"}, "--duration 0s: must be positive"},
		{[]string{"--partitions", "0"}, "--partitions 0: must be between 1 and 100000"},
		{[]string{"--topics", "0"}, "--topics 0: must be between 1 and --partitions (300)"},
		{[]string{"--partitions", "3", "--topics", "4"}, "--topics 4: must be between 1 and --partitions (3): each topic has a partition at least"},
		{[]string{"--brokers", "0"}, "--brokers 0: must be between 1 and 100"},
		{[]string{"--rf", "4"}, "--rf 4: must be at most --brokers (3)"},
		{[]string{"--rf", "1"}, "--rf 1: must be at least 2"},
		{[]string{"--brokers", "4", "--rf", "4"}, "--rf 4: must be at most --azs (3)"},
		{[]string{"--azs", "4"}, "--azs 4: must be between 1 and --brokers (3)"},
		{[]string{"--interval", "0s"}, "--interval 0s: must be at least 1ms"},
		{[]string{"--object-bytes", "0"}, "--object-bytes 0: must be between 1 and 64MiB, the leaders' upload buffer"},
		{[]string{"--object-bytes", "100MiB"}, "--object-bytes 100MiB: must be between 1 and 64MiB"},
		{[]string{"--batch-bytes", "2MiB"}, "--batch-bytes 2MiB: must be between 1 and 1MiB"},
		{[]string{"--codec", "lz4"}, "--codec lz4: unknown codec (want none, zstd or s2)"},
		{[]string{"--profile", "glacier"}, "--profile glacier: unknown profile (want none, s3express, s3standard)"},
		{[]string{"--fail-az", "az4"}, "--fail-az az4: no such AZ (want one of az1, az2, az3)"},
		{[]string{"--drain-timeout", "0s"}, "--drain-timeout 0s: must be positive"},
		{[]string{"--seed", "-1"}, `invalid value "-1" for flag -seed`},
		{[]string{"--partitions=12", "fast"}, `unexpected argument "fast"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCmd(t, "", append([]string{"demo"}, tc.args...)...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, "activetier demo: "+tc.want)
		})
	}
}

// SIGINT cancels the context: the demo stops its engines and exits 130
// without a report; TestMain's goleak check sees nothing left running.
func TestDemoInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(500*time.Millisecond, cancel) // as signal.NotifyContext does on SIGINT
	var out, errOut strings.Builder
	code := run(ctx, []string{"demo", "--json", "--duration", "1m", "--partitions", "6", "--rate", "1"}, strings.NewReader(""), &out, &errOut)
	assert.Equal(t, exitInterrupted, code)
	assert.Equal(t, "activetier demo: interrupted\n", errOut.String())
	assert.Empty(t, out.String())
}

// Replicas of a partition are in distinct AZs and leadership is spread
// evenly, whatever the broker count.
func TestSimPlacement(t *testing.T) {
	for _, tc := range []struct{ brokers, azs, rf, topics, partitions int }{
		{3, 3, 3, 4, 300}, {4, 3, 3, 1, 40}, {6, 3, 2, 7, 60}, {5, 2, 2, 10, 10}, {7, 3, 3, 1, 1},
	} {
		azs := azNames(tc.azs)
		objects, err := newMemObjects(azs, memstore.Profile{}, 1)
		require.NoError(t, err)
		s, err := newSim(simConfig{brokers: tc.brokers, azs: azs, rf: tc.rf, topics: tc.topics, partitions: tc.partitions,
			logger: slog.New(slog.DiscardHandler)}, objects)
		require.NoError(t, err)
		led := make(map[int32]int)
		for _, tp := range s.tps {
			rs := s.c.Replicas(tp)
			require.Len(t, rs, tc.rf, "%+v %s", tc, tp)
			azs := make(map[string]bool)
			for _, r := range rs {
				azs[r.AZ] = true
			}
			assert.Len(t, azs, tc.rf, "%+v: %s has replicas sharing an AZ", tc, tp)
			assert.Equal(t, rs[0], s.lastLeader(tp))
			led[rs[0].ID]++
		}
		for _, b := range s.brokers {
			assert.InDelta(t, float64(tc.partitions)/float64(tc.brokers), led[b.ID], 1, "%+v: broker %d leads %d", tc, b.ID, led[b.ID])
		}
		require.NoError(t, s.close())
	}
}

// The generator's batches are valid Kafka v2 record batches of JSON log
// lines, and the same seed gives the same bytes.
func TestRecordGen(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := newRecordGen(9), newRecordGen(9)
	for i := range 20 {
		x := a.batch(3, int64(100*i), now, 4000)
		y := b.batch(3, int64(100*i), now, 4000)
		require.Equal(t, x, y, "batch %d differs for the same seed", i)
		assert.GreaterOrEqual(t, len(x.Data), 4000)
		assert.Less(t, len(x.Data), 4000+1000, "a batch overshoots its target by at most one record")
		assert.Equal(t, now.UnixMilli(), x.MaxTimestamp)

		d := x.Data
		require.Equal(t, uint64(x.FirstOffset), binary.BigEndian.Uint64(d[0:]))
		require.Equal(t, len(d)-12, int(binary.BigEndian.Uint32(d[8:])), "batchLength")
		require.Equal(t, int32(3), int32(binary.BigEndian.Uint32(d[12:])), "partitionLeaderEpoch")
		require.Equal(t, byte(2), d[16], "magic")
		require.Equal(t, crc32.Checksum(d[21:], crc32.MakeTable(crc32.Castagnoli)), binary.BigEndian.Uint32(d[17:]), "crc")
		n := int(binary.BigEndian.Uint32(d[57:]))
		require.Equal(t, x.LastOffset-x.FirstOffset+1, int64(n))
		require.Equal(t, n-1, int(binary.BigEndian.Uint32(d[23:])), "lastOffsetDelta")

		rest := d[61:]
		for j := range n {
			length, k := binary.Varint(rest)
			require.Positive(t, k)
			rec := rest[k : k+int(length)]
			rest = rest[k+int(length):]
			rec = rec[1:]             // attributes
			_, k = binary.Varint(rec) // timestampDelta
			rec = rec[k:]
			delta, k := binary.Varint(rec)
			require.Equal(t, int64(j), delta)
			rec = rec[k:]
			kl, k := binary.Varint(rec)
			rec = rec[k+int(kl):]
			vl, k := binary.Varint(rec)
			value := rec[k : k+int(vl)]
			require.True(t, json.Valid(value), "record %d: %s", j, value)
			assert.Contains(t, string(value), `"level":"`)
		}
		require.Empty(t, rest, "records fill the batch exactly")
	}
	assert.NotEqual(t, newRecordGen(1).batch(0, 0, now, 500).Data, newRecordGen(2).batch(0, 0, now, 500).Data)
}

func TestDiffLogs(t *testing.T) {
	gen := newRecordGen(1)
	now := time.Now()
	a := gen.batch(0, 0, now, 100)
	b := gen.batch(0, a.LastOffset+1, now, 100)
	c := b
	c.Data = append([]byte(nil), b.Data...)
	c.Data[70] ^= 1
	e := b
	e.Epoch = 1
	assert.Empty(t, cluster.DiffLogs(sliceOf(a, b), sliceOf(a, b)))
	assert.Contains(t, cluster.DiffLogs(sliceOf(a, b), sliceOf(a)), "1 batches, the leader has 2")
	assert.Contains(t, cluster.DiffLogs(sliceOf(a, b), sliceOf(a, c)), "batch 1 (offsets")
	assert.Contains(t, cluster.DiffLogs(sliceOf(a, b), sliceOf(a, c)), "different bytes")
	assert.Contains(t, cluster.DiffLogs(sliceOf(a, b), sliceOf(a, e)), "has epoch 1, the leader's 0")
	assert.Contains(t, cluster.DiffLogs(sliceOf(a, b), sliceOf(b, a)), "batch 0 holds offsets")
}

func sliceOf(bs ...storage.Batch) []storage.Batch { return bs }

// Flag values at the edges of what the engines allow run as asked, or say
// which flags to change: the largest --object-bytes fits the leaders'
// buffer; an AZ failure asked of a run shorter than a producer step still
// happens; a flush interval the drain cannot wait for is named when the
// followers do not converge.
func TestDemoFlagCombinations(t *testing.T) {
	rep := demoJSON(t, "--object-bytes", formatBytes(maxDemoObjectBytes), "--duration", "300ms", "--partitions", "6", "--rate", "1")
	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)
	assert.Equal(t, int64(maxDemoObjectBytes), rep.ObjectBytesLimit)

	rep = demoJSON(t, "--fail-az", "az2", "--duration", "1ms", "--partitions", "6", "--rate", "1")
	require.NotNil(t, rep.Failover, "the AZ fails at the end of a run too short to reach its middle otherwise")
	assert.Equal(t, "az2", rep.Failover.AZ)
	assert.True(t, rep.FollowersConsistent, "diverged: %v", rep.Diverged)

	r := runCmd(t, "", "demo", "--json", "--interval", "2s", "--drain-timeout", "1s", "--duration", "100ms", "--partitions", "3", "--rate", "1")
	assert.Equal(t, exitFailure, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	assert.Contains(t, r.stderr, "follower logs differ from their leader's")
	assert.Contains(t, r.stderr, "; --interval 2s is not shorter than --drain-timeout 1s\n")
}

// Direct readers in other AZs end having yielded exactly the leaders'
// committed logs, reading each object about once, and the report prices
// them next to consuming across AZs from the leaders.
func TestDemoReaders(t *testing.T) {
	rep := demoJSON(t, "--duration", "1500ms", "--partitions", "12", "--rate", "2", "--seed", "7", "--readers", "2")
	require.NotNil(t, rep.ReadersConsistent)
	require.True(t, *rep.ReadersConsistent, "%+v", rep.Readers)
	assert.True(t, rep.FollowersConsistent)
	require.Len(t, rep.Readers.Readers, 2)
	for i, rd := range rep.Readers.Readers {
		assert.Equal(t, []string{"az2", "az3"}[i], rd.AZ, "reader %d", rd.ID)
		assert.Equal(t, 12, rd.Partitions)
		assert.Equal(t, rep.BytesProduced, rd.Bytes, "every produced byte, none twice")
		assert.Equal(t, rep.RecordsProduced, rd.Records)
		assert.Positive(t, rd.LagP50MS)
		assert.GreaterOrEqual(t, rd.LagP99MS, rd.LagP50MS)
		assert.Positive(t, rd.Gets)
		assert.LessOrEqual(t, rd.GetsPerObject, 1.1, "a reader's partitions share the objects: one GET each")
		assert.Positive(t, rd.MetadataBytes)
		assert.Positive(t, rd.CostUSD)
		assert.InDelta(t, rd.GetUSD+rd.RetrievalUSD+rd.MetadataUSD+rd.FromLeaderUSD, rd.CostUSD, 1e-15)
		assert.Positive(t, rd.CrossAZCostUSD)
		assert.Less(t, rd.CrossAZBytes, rd.Bytes, "a third of the partitions are led from the reader's AZ")
	}
	assert.Greater(t, rep.Readers.CrossAZCostUSD, rep.Readers.CostUSD)
	assert.Contains(t, rep.Readers.Pricing, "no transfer fee for a GET from another AZ")

	// The readers' GETs are not the replication's: the same run without
	// readers has the same GET count, give or take the run's own noise,
	// and at least one GET per object per follower either way.
	assert.GreaterOrEqual(t, rep.Gets, rep.Puts)

	text := runCmd(t, "", "demo", "--duration", "1s", "--partitions", "6", "--rate", "1", "--readers", "1", "--reader-share", "0.5")
	require.Equal(t, exitOK, text.code, text.stderr)
	assert.Contains(t, text.stdout, "direct readers")
	assert.Regexp(t, `reader 1 in az2\s+3\s`, text.stdout, "half the partitions")
	assert.Contains(t, text.stdout, "from the leader")
	assert.Contains(t, text.stdout, "consuming directly cost")
}

// With an AZ down halfway, the readers in the surviving AZs still end
// with exactly the committed logs; a reader in the failed AZ stops with
// it, and what it yielded until then is the start of them.
func TestDemoReadersFailAZ(t *testing.T) {
	for _, tc := range []struct {
		failAZ  string
		readers string
		stopped int // the reader in the failed AZ, or 0
	}{
		{"az1", "2", 0}, // readers in az2 and az3
		{"az2", "3", 1}, // reader 1 is in az2
	} {
		t.Run(tc.failAZ, func(t *testing.T) {
			rep := demoJSON(t, "--duration", "2s", "--partitions", "12", "--rate", "2", "--fail-az", tc.failAZ, "--seed", "3", "--readers", tc.readers)
			require.NotNil(t, rep.Failover)
			require.NotNil(t, rep.ReadersConsistent)
			require.True(t, *rep.ReadersConsistent, "%+v", rep.Readers)
			survivors := make(map[int64]bool) // records yielded
			for _, rd := range rep.Readers.Readers {
				assert.True(t, rd.Consistent, "reader %d: %s", rd.ID, rd.Diverged)
				assert.Empty(t, rd.Error)
				if rd.ID == tc.stopped {
					assert.Equal(t, tc.failAZ, rd.StoppedWith)
					assert.Less(t, rd.Records, rep.RecordsProduced)
					continue
				}
				assert.Empty(t, rd.StoppedWith)
				assert.Positive(t, rd.Bytes)
				survivors[rd.Records] = true
			}
			assert.Len(t, survivors, 1, "the surviving readers yielded the same logs")
		})
	}
}

// --readers and --reader-share refuse what makes no sense.
func TestDemoReadersFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--readers", "-1"}, {"--readers", "33"}, {"--readers", "1", "--reader-share", "0"},
		{"--readers", "1", "--reader-share", "1.5"}, {"--readers", "1", "--reader-share", "NaN"}, {"--reader-share", "0.5"},
	} {
		r := runCmd(t, "", append([]string{"demo"}, args...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		assert.Empty(t, r.stdout)
	}
}
