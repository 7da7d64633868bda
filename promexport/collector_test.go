package promexport_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/promexport"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// engine is a Node whose statistics the test sets, including ones a
// broken engine might report.
type engine struct {
	stats  walstore.NodeStats
	health walstore.Health
}

func (e *engine) Stats() walstore.NodeStats { return e.stats }
func (e *engine) Health() walstore.Health   { return e.health }

// meterWithTraffic returns a Meter that saw three topics' objects stored
// and read.
func meterWithTraffic(t *testing.T) *metering.Meter {
	t.Helper()
	ctx := context.Background()
	m, err := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	require.NoError(t, err)
	inner, _ := memtest.Stores(t)
	store := m.Store(inner)
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecNone})
	require.NoError(t, err)
	defer enc.Close()
	var in []combiner.SectionInput
	for i, topic := range []string{"orders", "clicks", "audit"} {
		for p := range 3 {
			in = append(in, combiner.SectionInput{Partition: metadata.TopicPartition{Topic: topic, Partition: int32(p)},
				Batches: []storage.Batch{{Epoch: 1, LastOffset: 9, Data: make([]byte, 100*(3-i))}}})
		}
	}
	body, infos, err := enc.Encode(nil, in)
	require.NoError(t, err)
	ref, err := store.Put(ctx, "o1", body)
	require.NoError(t, err)
	for _, s := range infos {
		_, err := store.GetRange(ctx, ref, s.Position, s.Length)
		require.NoError(t, err)
	}
	_, err = store.GetRange(ctx, metadata.ObjectRef{Bucket: "b1", Key: "missing"}, 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound)
	return m
}

func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value returns the metric of mf whose labels include want.
func value(t *testing.T, mf *dto.MetricFamily, want map[string]string) *dto.Metric {
	t.Helper()
	require.NotNil(t, mf)
next:
	for _, m := range mf.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s has no series with %v", mf.GetName(), want)
	return nil
}

func TestCollector(t *testing.T) {
	m := meterWithTraffic(t)
	var lag walstore.Histogram
	const perDoubling = walstore.HistogramBucketsPerDoubling
	lag.Counts[11*perDoubling], lag.Counts[20*perDoubling] = 3, 1 // about 2ms, about 1s
	lag.Count, lag.Sum = 4, 1100*time.Millisecond
	e := &engine{
		stats: walstore.NodeStats{
			Leader: walstore.LeaderStats{AppendedBytes: 1000, Objects: 2, BufferedBytes: 77, UploadsInFlight: 1, UploadRetries: 5},
			// More corrupt fetches than fetch errors: a broken engine's
			// report must not make a counter negative.
			Follower: walstore.FollowerStats{FollowerCounters: walstore.FollowerCounters{FetchErrors: 1, Corrupt: 2, Held: 3}, ApplyLag: lag,
				Lag: map[metadata.TopicPartition]int64{{Topic: "orders", Partition: 1}: 4, {Topic: "orders", Partition: 0}: 6}},
		},
		health: walstore.Health{Degraded: true},
	}
	c, err := promexport.New(promexport.Config{Meter: m, Nodes: []promexport.Node{{Broker: "1", Engine: e}}, PartitionSeries: 2})
	require.NoError(t, err)

	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems, "metric names and help follow Prometheus's conventions")

	mfs := gather(t, c)
	for name := range mfs {
		require.Contains(t, promexport.MetricNames(), name)
	}
	require.Equal(t, 10.0, value(t, mfs["activetier_store_requests_total"], map[string]string{"op": "get"}).GetCounter().GetValue())
	require.Equal(t, 1.0, value(t, mfs["activetier_store_errors_total"], map[string]string{"op": "get", "kind": "not_found"}).GetCounter().GetValue())
	require.Equal(t, uint64(10), value(t, mfs["activetier_store_request_duration_seconds"], map[string]string{"op": "get"}).GetHistogram().GetSampleCount())
	require.Equal(t, 77.0, value(t, mfs["activetier_buffered_bytes"], map[string]string{"broker": "1"}).GetGauge().GetValue())
	require.Equal(t, 1.0, value(t, mfs["activetier_degraded"], nil).GetGauge().GetValue())
	require.Equal(t, 10.0, value(t, mfs["activetier_lag_offsets"], nil).GetGauge().GetValue())
	require.Zero(t, value(t, mfs["activetier_fetch_errors_total"], map[string]string{"kind": "other"}).GetCounter().GetValue())
	require.Len(t, mfs["activetier_partition_lag_offsets"].Metric, 2)
	h := value(t, mfs["activetier_replication_lag_seconds"], nil).GetHistogram()
	require.Equal(t, uint64(4), h.GetSampleCount())
	for _, b := range h.Bucket {
		switch {
		case b.GetUpperBound() < 0.0025: // the samples are in [2.048ms, 2.44ms)
			require.Zero(t, b.GetCumulativeCount(), "le %g", b.GetUpperBound())
		case b.GetUpperBound() < 1:
			require.Equal(t, uint64(3), b.GetCumulativeCount(), "le %g", b.GetUpperBound())
		case b.GetUpperBound() > 1.1:
			require.Equal(t, uint64(4), b.GetCumulativeCount(), "le %g", b.GetUpperBound())
		}
	}

	// Costs: per topic, the three topics and the unattributed GET; per
	// partition, only the first two partitions seen.
	topics := map[string]float64{}
	for _, s := range mfs["activetier_cost_usd_total"].Metric {
		for _, l := range s.Label {
			if l.GetName() == "topic" {
				topics[l.GetValue()] += s.GetCounter().GetValue()
			}
		}
	}
	require.Len(t, topics, 4, "%v", topics)
	require.Greater(t, topics["orders"], topics["clicks"])
	require.Greater(t, topics["clicks"], topics["audit"])
	var sum float64
	for _, v := range topics {
		sum += v
	}
	require.InDelta(t, m.Snapshot().Ledger.Total().Cost.TotalUSD, sum, 1e-15)
	require.Len(t, mfs["activetier_partition_cost_usd_total"].Metric, 2*6)
}

// Topics past MaxTopics share the overflow row; the sum stays whole.
func TestCollectorBoundsTopics(t *testing.T) {
	m := meterWithTraffic(t)
	c, err := promexport.New(promexport.Config{Meter: m, MaxTopics: 1})
	require.NoError(t, err)
	mfs := gather(t, c)
	seen := map[string]bool{}
	for _, s := range mfs["activetier_cost_usd_total"].Metric {
		for _, l := range s.Label {
			if l.GetName() == "topic" {
				seen[l.GetValue()] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"orders": true, metering.OverflowTopic: true}, seen)
	require.Nil(t, mfs["activetier_partition_cost_usd_total"], "no partition series unless asked")
	require.Nil(t, mfs["activetier_buffered_bytes"], "no engine metrics without Nodes")
}

func TestNewValidates(t *testing.T) {
	m := meterWithTraffic(t)
	for _, cfg := range []promexport.Config{
		{},
		{Meter: m, PartitionSeries: -1},
		{Meter: m, MaxTopics: -1},
		{Nodes: []promexport.Node{{Broker: "1"}}},
		{Nodes: []promexport.Node{{Broker: "1", Engine: &engine{}}, {Broker: "1", Engine: &engine{}}}},
	} {
		_, err := promexport.New(cfg)
		require.ErrorIs(t, err, promexport.ErrInvalidConfig)
	}
}

// The exposition text of a registry holding the Collector parses, and
// names only activetier_ metrics.
func TestExposition(t *testing.T) {
	c, err := promexport.New(promexport.Config{Meter: meterWithTraffic(t)})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Positive(t, n)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		require.True(t, strings.HasPrefix(mf.GetName(), "activetier_"), mf.GetName())
	}
}
