package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
)

// Partitions are divided among topics one each and the rest in proportion
// N, N-1, ..., 1, numbered from 0 within each topic.
func TestTopicPartitions(t *testing.T) {
	for _, tc := range []struct {
		topics, partitions int
		want               []int // partitions per topic
	}{
		{4, 300, []int{119, 90, 60, 31}},
		{4, 30, []int{11, 9, 6, 4}},
		{1, 7, []int{7}},
		{3, 3, []int{1, 1, 1}},
		{4, 6, []int{2, 2, 1, 1}},
		{2, 4, []int{2, 2}},
		{3, 100, []int{50, 33, 17}},
		{10, 11, []int{2, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(fmt.Sprintf("%d of %d", tc.topics, tc.partitions), func(t *testing.T) {
			tps, err := topicPartitions(tc.topics, tc.partitions)
			require.NoError(t, err)
			require.Len(t, tps, tc.partitions)
			got := make([]int, tc.topics)
			for _, tp := range tps {
				var k int
				_, err := fmt.Sscanf(tp.Topic, "topic%d", &k)
				require.NoError(t, err, tp.Topic)
				require.Equal(t, int32(got[k-1]), tp.Partition, "numbered from 0 within %s", tp.Topic)
				got[k-1]++
			}
			assert.Equal(t, tc.want, got)
		})
	}
	// At the limits every topic still gets one, and they sum.
	for _, tc := range [][2]int{{maxDemoPartitions, maxDemoPartitions}, {maxDemoPartitions - 1, maxDemoPartitions}, {1000, 1001}} {
		tps, err := topicPartitions(tc[0], tc[1])
		require.NoError(t, err)
		require.Len(t, tps, tc[1])
		topics := make(map[string]bool)
		for _, tp := range tps {
			topics[tp.Topic] = true
		}
		assert.Len(t, topics, tc[0])
	}
	for _, tc := range [][2]int{{0, 5}, {-1, 5}, {6, 5}} {
		_, err := topicPartitions(tc[0], tc[1])
		assert.Error(t, err, "%d topics of %d partitions", tc[0], tc[1])
	}
}

// tallyLog counts, independently of package metering, what each partition
// should be charged for the metadata messages that pass through it: a
// message's bytes times the AZ crossings they make, split equally among the
// entries, markers and commits it carries, and for each entry read one follower
// fetch's worth of control bytes.
type tallyLog struct {
	metadata.Log
	t *testing.T

	mu      sync.Mutex
	meta    map[metadata.TopicPartition]float64
	control map[metadata.TopicPartition]float64
}

func (l *tallyLog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	off, err := l.Log.Append(ctx, partition, value)
	if err == nil {
		l.tally(value, costmodel.DefaultMetadataRF, false)
	}
	return off, err
}

func (l *tallyLog) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	recs, err := l.Log.Read(ctx, partition, from, max)
	for _, r := range recs {
		l.tally(r.Value, 1, true)
	}
	return recs, err
}

func (l *tallyLog) tally(value []byte, crossings int, read bool) {
	m, err := metadata.DecodeMessage(value)
	if !assert.NoError(l.t, err) {
		return
	}
	var named []metadata.TopicPartition
	for _, e := range m.Entries {
		named = append(named, e.Partition)
	}
	for _, mk := range m.Markers {
		named = append(named, mk.Partition)
	}
	for _, c := range m.Commits {
		named = append(named, c.Partition)
	}
	if !assert.NotEmpty(l.t, named, "a message names a partition") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tp := range named {
		l.meta[tp] += float64(len(value)*crossings) / float64(len(named))
	}
	if read {
		for _, e := range m.Entries {
			l.control[e.Partition] += costmodel.DefaultControlBytesPerPartition
		}
	}
}

// The demo's metadata log is wrapped by the Meter, so each partition's
// metadata and control traffic in the ledger is what its own entries and
// markers caused, message by message, not an estimate: it equals an
// independent tally of every message appended and read, partition by
// partition, with nothing left unattributed.
func TestSimLedgerMetadataByMessage(t *testing.T) {
	ctx := context.Background()
	const seed = 11
	t.Logf("seed %d", seed)
	cfg := simConfig{
		brokers: 3, azs: azNames(3), topics: 3, partitions: 12, rf: 3,
		interval: 20 * time.Millisecond, objectBytes: 4 << 20, codec: metadata.CodecZstd,
		seed: seed, logger: slog.New(slog.DiscardHandler),
	}
	meter, err := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	require.NoError(t, err)
	tally := &tallyLog{t: t, meta: map[metadata.TopicPartition]float64{}, control: map[metadata.TopicPartition]float64{}}
	cfg.wrapLog = func(l metadata.Log) metadata.Log {
		tally.Log = l
		return meter.Log(tally)
	}
	objects, err := newMemObjects(cfg.azs, memstore.Profile{}, seed)
	require.NoError(t, err)
	s, err := newSim(cfg, meteredObjects{objects, meter})
	require.NoError(t, err)
	require.NoError(t, s.start(ctx))
	sample, err := newCompressionSample(cfg.codec)
	require.NoError(t, err)
	defer sample.close()
	p := &producer{s: s, gen: newRecordGen(seed), pick: rand.New(rand.NewPCG(seed, 1)), rate: 2e6, batchBytes: 4 << 10, sample: sample}
	start := time.Now()
	require.NoError(t, p.produce(ctx, start, start.Add(600*time.Millisecond), func(time.Time) {}))
	_, _, err = waitCaughtUp(ctx, s, 10*time.Second)
	require.NoError(t, err)
	for _, b := range s.brokers {
		require.NoError(t, b.Stop())
	}
	require.NoError(t, s.close())

	l := meter.Snapshot().Ledger
	assert.Zero(t, l.Unattributed.Share.MetadataBytes, "every message names its partitions")
	assert.Zero(t, l.Unattributed.Share.ControlBytes)
	require.Len(t, l.Partitions, cfg.partitions)
	var total float64
	for _, c := range l.Partitions {
		tp := c.Partition
		require.Positive(t, tally.meta[tp], "%s published nothing", tp)
		assert.InEpsilon(t, tally.meta[tp], c.Share.MetadataBytes, 1e-9, tp.String())
		assert.Equal(t, tally.control[tp], c.Share.ControlBytes, tp.String())
		total += c.Share.MetadataBytes
	}
	assert.Len(t, tally.meta, cfg.partitions, "no partition the ledger lacks")

	// The Meter saw every message the log took and gave: its usage is the
	// ledger's, and the log's own counts agree.
	u, st := meter.Usage(), s.meta.Stats().Total
	assert.Equal(t, st.AppendedBytes*costmodel.DefaultMetadataRF+st.BytesRead, u.MetadataBytes)
	assert.InEpsilon(t, float64(u.MetadataBytes), total, 1e-9)
	assert.Positive(t, u.ControlBytes)
}

// The text report lists the five costliest topics with their partitions
// and share, says how many more --json has, and the three costliest
// partitions; no line ends in padding.
func TestLedgerText(t *testing.T) {
	l := &ledgerJSON{SumUSD: 28}
	for i := 7; i >= 1; i-- {
		l.Topics = append(l.Topics, ledgerRow{Topic: fmt.Sprintf("topic%d", 8-i), Partitions: i, CostUSD: float64(i)})
	}
	for p := range int32(4) {
		l.TopPartitions = append(l.TopPartitions, ledgerRow{Topic: "topic1", Partition: &p, CostUSD: float64(4 - p)})
	}
	var out strings.Builder
	require.NoError(t, l.writeText(&out))
	assert.Equal(t, `
topics that cost most    activetier  share
  topic1 (7 partitions)  $7.00       25.0%
  topic2 (6 partitions)  $6.00       21.4%
  topic3 (5 partitions)  $5.00       17.9%
  topic4 (4 partitions)  $4.00       14.3%
  topic5 (3 partitions)  $3.00       10.7%
  (2 more in --json)
costliest partitions
  topic1-0               $4.00       14.3%
  topic1-1               $3.00       10.7%
  topic1-2               $2.00       7.1%
`, out.String())

	out.Reset()
	require.NoError(t, (&ledgerJSON{}).writeText(&out))
	assert.Empty(t, out.String(), "no ledger, no lines")
	require.NoError(t, (*ledgerJSON)(nil).writeText(&out))
	assert.Empty(t, out.String())
}
