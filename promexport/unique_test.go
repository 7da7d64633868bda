package promexport_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/promexport"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// hostile is a topic name that is not valid UTF-8, so not a valid label
// value: prometheus.MustNewConstMetric panics on it.
const hostile = "\xff\xfe-topic"

// feeder puts usage into a Meter through its wrappers, as a broker's
// traffic would.
type feeder struct {
	t   testing.TB
	m   *metering.Meter
	log metadata.Log
	st  storage.ObjectStore
}

func newFeeder(t testing.TB) *feeder {
	t.Helper()
	m, err := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	require.NoError(t, err)
	l, err := memstore.NewLog(1)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	st, _ := memtest.Stores(t)
	return &feeder{t: t, m: m, log: m.Log(l), st: m.Store(st)}
}

// markers appends messages of epoch-start markers for tps, up to 1000 a
// message: each partition gets a ledger row.
func (f *feeder) markers(tps ...metadata.TopicPartition) {
	f.t.Helper()
	for chunk := range slices.Chunk(tps, 1000) {
		m := &metadata.Message{WriterBrokerID: 1}
		for _, tp := range chunk {
			m.Markers = append(m.Markers, metadata.EpochStart{Partition: tp, Epoch: 1, LeaderBrokerID: 1})
		}
		b, err := metadata.AppendMessage(nil, m)
		require.NoError(f.t, err)
		_, err = f.log.Append(context.Background(), 0, b)
		require.NoError(f.t, err)
	}
}

// hostile feeds the names a broken or hostile writer could: a metadata
// message naming a topic that is not UTF-8 (checksum and all correct),
// and a combined object whose footer names one.
func (f *feeder) hostile() {
	f.t.Helper()
	const placeholder = "zzzzzzzz"
	require.Len(f.t, hostile, len(placeholder))
	msg, err := metadata.AppendMessage(nil, &metadata.Message{Markers: []metadata.EpochStart{{Partition: metadata.TopicPartition{Topic: placeholder}, Epoch: 1}}})
	require.NoError(f.t, err)
	body := bytes.Replace(msg[:len(msg)-4], []byte(placeholder), []byte(hostile), 1)
	msg = binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	_, err = f.log.Append(context.Background(), 0, msg)
	require.NoError(f.t, err)

	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecNone})
	require.NoError(f.t, err)
	defer enc.Close()
	obj, infos, err := enc.Encode(nil, []combiner.SectionInput{
		{Partition: metadata.TopicPartition{Topic: hostile}, Batches: []storage.Batch{{Epoch: 1, Data: make([]byte, 64)}}},
		{Partition: metadata.TopicPartition{Topic: "(overflow)", Partition: 1}, Batches: []storage.Batch{{Epoch: 1, Data: make([]byte, 64)}}},
	})
	require.NoError(f.t, err)
	ref, err := f.st.Put(context.Background(), fmt.Sprintf("hostile-%d", time.Now().UnixNano()), obj)
	require.NoError(f.t, err)
	_, err = f.st.GetRange(context.Background(), ref, infos[0].Position, infos[0].Length)
	require.NoError(f.t, err)
}

// lockedEngine is an Engine whose statistics change while it is scraped.
type lockedEngine struct {
	mu    sync.Mutex
	stats walstore.NodeStats
}

func (e *lockedEngine) Stats() walstore.NodeStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Follower.Lag = maps.Clone(e.stats.Follower.Lag)
	return s
}

func (e *lockedEngine) Health() walstore.Health { return walstore.Health{} }

func (e *lockedEngine) setLag(lag map[metadata.TopicPartition]int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Follower.Lag = lag
}

// scraped is one GET of /metrics.
type scraped struct {
	status   int
	body     []byte
	families map[string]*dto.MetricFamily
	series   int
}

// scrape serves reg as a broker does (promhttp, default options) and
// GETs it once; a 200 answer must parse as the text exposition format,
// with no series twice.
func scrape(t testing.TB, srv *httptest.Server) scraped {
	t.Helper()
	return parse(t, get(t, srv))
}

// get is one GET of /metrics, unparsed.
func get(t testing.TB, srv *httptest.Server) scraped {
	t.Helper()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return scraped{status: resp.StatusCode, body: body}
}

func parse(t testing.TB, out scraped) scraped {
	t.Helper()
	if out.status != http.StatusOK {
		return out
	}
	var err error
	p := expfmt.NewTextParser(model.UTF8Validation)
	out.families, err = p.TextToMetricFamilies(bytes.NewReader(out.body))
	require.NoError(t, err)
	for name, mf := range out.families {
		seen := map[string]bool{}
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := strings.Join(labels, ",")
			require.False(t, seen[key], "%s{%s} twice", name, key)
			seen[key] = true
		}
		out.series += len(mf.Metric)
	}
	return out
}

func serve(t testing.TB, c prometheus.Collector) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv
}

// series returns the value of the series of name whose labels are want.
func series(t testing.TB, s scraped, name string, want map[string]string) float64 {
	t.Helper()
	mf := s.families[name]
	require.NotNil(t, mf, name)
next:
	for _, m := range mf.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		for _, l := range m.Label {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s has no series %v", name, want)
	return 0
}

// A topic deleted and created again (same name, new topic id), followed
// in both incarnations, and a topic known by its id alone whose hex form
// is another topic's name: what would be labelled alike is one series,
// the sum, and the scrape answers 200 (a registry refuses a scrape with a
// series twice, with a 500, at every scrape).
func TestReincarnatedTopicScrapes(t *testing.T) {
	old, reborn := [16]byte{1, 0xaa}, [16]byte{2, 0xbb}
	idOnly := [16]byte{0xc0, 0xff, 0xee}
	hexName := hex.EncodeToString(idOnly[:])
	f := newFeeder(t)
	var tps []metadata.TopicPartition
	for _, id := range [][16]byte{old, reborn} {
		for p := range 3 {
			tps = append(tps, metadata.TopicPartition{Topic: "orders", TopicID: id, Partition: int32(p)})
		}
	}
	tps = append(tps, metadata.TopicPartition{TopicID: idOnly}, metadata.TopicPartition{Topic: hexName})
	f.markers(tps...)

	lag := map[metadata.TopicPartition]int64{
		{Topic: "orders", TopicID: old, Partition: 0}:    5,
		{Topic: "orders", TopicID: reborn, Partition: 0}: 7,
		{Topic: "orders", TopicID: old, Partition: 1}:    1,
		{TopicID: idOnly}: 2,
		{Topic: hexName}:  3,
	}
	// Broker 2 follows what broker 1 leads and meters; broker 3 follows
	// the same partitions: one set of series per broker.
	e2, e3 := &lockedEngine{}, &lockedEngine{}
	e2.setLag(lag)
	e3.setLag(maps.Clone(lag))
	c, err := promexport.New(promexport.Config{Meter: f.m, PartitionSeries: 100,
		Nodes: []promexport.Node{{Broker: "2", Engine: e2}, {Broker: "3", Engine: e3}}})
	require.NoError(t, err)
	srv := serve(t, c)
	s := scrape(t, srv)
	require.Equal(t, http.StatusOK, s.status, "%s", s.body)

	for _, broker := range []string{"2", "3"} {
		require.Equal(t, 12.0, series(t, s, "activetier_partition_lag_offsets", map[string]string{"broker": broker, "topic": "orders", "partition": "0"}))
		require.Equal(t, 1.0, series(t, s, "activetier_partition_lag_offsets", map[string]string{"broker": broker, "topic": "orders", "partition": "1"}))
		require.Equal(t, 5.0, series(t, s, "activetier_partition_lag_offsets", map[string]string{"broker": broker, "topic": hexName, "partition": "0"}))
		require.Equal(t, 18.0, series(t, s, "activetier_lag_offsets", map[string]string{"broker": broker}))
	}
	require.Len(t, s.families["activetier_partition_lag_offsets"].Metric, 2*3)
	require.Len(t, s.families["activetier_partition_cost_usd_total"].Metric, 6*4, "orders-0..2 and the hex name's partition 0")

	// The partition series sum to the ledger: nothing is lost in merging.
	l := f.m.Snapshot().Ledger
	var sum float64
	for _, m := range s.families["activetier_partition_cost_usd_total"].Metric {
		sum += m.Counter.GetValue()
	}
	require.InDelta(t, l.Total().Cost.TotalUSD-l.Unattributed.Cost.TotalUSD, sum, 1e-15)
	require.Zero(t, series(t, s, "activetier_scrape_skipped_series", map[string]string{}))

	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)

	// Again, with yet another incarnation: still 200, no new rows.
	f.markers(metadata.TopicPartition{Topic: "orders", TopicID: [16]byte{3}, Partition: 0})
	again := scrape(t, srv)
	require.Equal(t, http.StatusOK, again.status, "%s", again.body)
	require.Equal(t, s.series, again.series)
	require.Equal(t, 3+2, len(f.m.Snapshot().Ledger.Partitions))
}

// A topic name that is not UTF-8, from the Meter's metadata log and PUT
// bodies or from an Engine, neither panics the Collector (a panic the
// registry recovers, failing every scrape with a 500) nor fails the
// scrape: the Meter never gives it a row, and a series the Collector
// cannot make is left out and counted, once per scrape.
func TestHostileNamesNeverPanic(t *testing.T) {
	f := newFeeder(t)
	f.markers(metadata.TopicPartition{Topic: "orders"})
	f.hostile()
	_, err := f.log.Read(context.Background(), 0, 0, 100)
	require.NoError(t, err)
	e := &lockedEngine{}
	e.setLag(map[metadata.TopicPartition]int64{{Topic: hostile}: 4, {Topic: "orders"}: 1, {Topic: "", Partition: 2}: 1, {Topic: "(overflow)"}: 1})
	c, err := promexport.New(promexport.Config{Meter: f.m, PartitionSeries: 10, Nodes: []promexport.Node{{Broker: "1", Engine: e}}})
	require.NoError(t, err)
	srv := serve(t, c)
	for range 2 {
		s := scrape(t, srv)
		require.Equal(t, http.StatusOK, s.status, "%s", s.body)
		require.Equal(t, 1.0, series(t, s, "activetier_scrape_skipped_series", map[string]string{}), "the hostile lag series, in each scrape")
		require.Equal(t, 7.0, series(t, s, "activetier_lag_offsets", map[string]string{"broker": "1"}), "the total keeps it")
		require.Len(t, s.families["activetier_partition_lag_offsets"].Metric, 3)
		for _, m := range s.families["activetier_cost_usd_total"].Metric {
			for _, l := range m.Label {
				require.NotContains(t, l.GetValue(), "\xff")
			}
		}
	}
	require.Positive(t, f.m.Snapshot().Ledger.InvalidPartitions)
	require.Positive(t, f.m.Snapshot().UndecodableMessages)
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)

	_, err = promexport.New(promexport.Config{Nodes: []promexport.Node{{Broker: "\xff", Engine: e}}})
	require.ErrorIs(t, err, promexport.ErrInvalidConfig, "a broker label that is not UTF-8")
}

// Nothing to export yet: no partitions, no traffic, PartitionSeries on.
func TestScrapeWithNoPartitions(t *testing.T) {
	f := newFeeder(t)
	c, err := promexport.New(promexport.Config{Meter: f.m, PartitionSeries: 1000, Nodes: []promexport.Node{{Broker: "1", Engine: &lockedEngine{}}}})
	require.NoError(t, err)
	s := scrape(t, serve(t, c))
	require.Equal(t, http.StatusOK, s.status, "%s", s.body)
	require.Nil(t, s.families["activetier_partition_lag_offsets"])
	require.Nil(t, s.families["activetier_partition_cost_usd_total"])
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// A broker's scale: 100,000 partitions in the ledger and followed, two
// incarnations of one topic, hostile names. The scrape answers 200 with
// series bounded by PartitionSeries and MaxTopics, whatever the
// partitions; its time and allocations are logged, not asserted.
func TestScrapeAtScale(t *testing.T) {
	const (
		topics, perTopic = 2000, 50 // 100,000 partitions
		partitionSeries  = 1000
	)
	f := newFeeder(t)
	tps := []metadata.TopicPartition{
		{Topic: "reborn", TopicID: [16]byte{1}, Partition: 0},
		{Topic: "reborn", TopicID: [16]byte{2}, Partition: 0},
	}
	// The reborn topic's row and 99,999 others: 100,000 rows, as many as
	// the Meter keeps by default.
	for i := 0; len(tps) < 1+topics*perTopic; i++ {
		tps = append(tps, metadata.TopicPartition{Topic: fmt.Sprintf("svc-%04d.events", i/perTopic), Partition: int32(i % perTopic)})
	}
	f.markers(tps...)
	f.hostile()
	lag := make(map[metadata.TopicPartition]int64, len(tps)+1)
	for i, tp := range tps {
		lag[tp] = int64(i % 7)
	}
	lag[metadata.TopicPartition{Topic: hostile}] = 1       // sorts last: no series
	lag[metadata.TopicPartition{Topic: "0" + hostile}] = 1 // sorts first: a series skipped
	e := &lockedEngine{}
	e.setLag(lag)
	require.Equal(t, topics*perTopic, len(f.m.Snapshot().Ledger.Partitions), "the incarnations share a row")
	require.Equal(t, metering.DefaultMaxPartitions, topics*perTopic)

	c, err := promexport.New(promexport.Config{Meter: f.m, PartitionSeries: partitionSeries, Nodes: []promexport.Node{{Broker: "1", Engine: e}}})
	require.NoError(t, err)
	srv := serve(t, c)
	scrape(t, srv) // warm up the connection and the pools
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s := get(t, srv)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, s.status, "%.300s", s.body)
	s = parse(t, s)

	// Fixed series (per op, per kind, per broker) are a few dozen; the
	// rest are 6 cost lines per partition and per topic (MaxTopics, plus
	// the overflow and unattributed rows) and one lag per partition.
	bound := 6*partitionSeries + 6*(promexport.DefaultMaxTopics+2) + partitionSeries + 200
	require.LessOrEqual(t, s.series, bound)
	require.Equal(t, partitionSeries-1, len(s.families["activetier_partition_lag_offsets"].Metric), "the first partitions but the one skipped")
	require.Equal(t, 6*partitionSeries, len(s.families["activetier_partition_cost_usd_total"].Metric))
	require.Equal(t, 1.0, series(t, s, "activetier_scrape_skipped_series", map[string]string{}))
	t.Logf("scrape of %d partitions (server and client): %d series, %d bytes, %v, %.1f MiB allocated, heap in use %.1f MiB after",
		len(tps), s.series, len(s.body), took, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(after.HeapInuse)/(1<<20))

	// promlint's duplicate check compares every pair of series of a
	// family, hours at this size under -race; scrape has checked that no
	// series comes twice, so the linter gets what its other checks read
	// (names, help, types, label names) from a few series of each family.
	sample := make([]*dto.MetricFamily, 0, len(s.families))
	for _, mf := range s.families {
		mf.Metric = mf.Metric[:min(len(mf.Metric), 10)]
		sample = append(sample, mf)
	}
	problems, err := promlint.NewWithMetricFamilies(sample).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
}

// Scrapes run concurrently while partitions appear and disappear between
// them (an incarnation of a topic replacing another, partitions followed
// and unfollowed) and traffic flows: every scrape answers 200. Run with
// -race.
func TestConcurrentScrapes(t *testing.T) {
	const seed = 20260101
	t.Logf("seed %d", seed)
	f := newFeeder(t)
	e := &lockedEngine{}
	c, err := promexport.New(promexport.Config{Meter: f.m, PartitionSeries: 50, Nodes: []promexport.Node{{Broker: "1", Engine: e}}})
	require.NoError(t, err)
	srv := serve(t, c)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the broker's side
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := [16]byte{byte(i%3 + 1)}
			lag := map[metadata.TopicPartition]int64{}
			for p := range (i*seed)%40 + 1 {
				lag[metadata.TopicPartition{Topic: "flip", TopicID: id, Partition: int32(p)}] = int64(p)
				lag[metadata.TopicPartition{Topic: "flip", TopicID: [16]byte{9}, Partition: int32(p % 3)}] = 1
			}
			if i%5 == 0 {
				lag[metadata.TopicPartition{Topic: hostile}] = 1
			}
			e.setLag(lag)
			f.markers(metadata.TopicPartition{Topic: "flip", TopicID: id, Partition: int32(i % 60)})
		}
	}()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for range 20 {
				resp, err := http.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d: %.300s", resp.StatusCode, body)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	close(stop)
	wg.Wait()
}
