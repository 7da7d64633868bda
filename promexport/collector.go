package promexport

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/walstore"
)

// ErrInvalidConfig is returned by New for a Config it cannot use.
var ErrInvalidConfig = errors.New("promexport: invalid config")

// DefaultMaxTopics bounds the topics given cost series of their own.
const DefaultMaxTopics = 1000

// Engine is what the Collector reads of a walstore.Node at scrape time.
type Engine interface {
	Stats() walstore.NodeStats
	Health() walstore.Health
}

// Node is one broker's engines, labelled broker=Broker.
type Node struct {
	Broker string
	Engine Engine
}

// Config configures a Collector. Meter and Nodes may each be left out, not
// both.
type Config struct {
	// Meter supplies the request, byte, latency and cost metrics.
	Meter *metering.Meter
	// Nodes supply the engine metrics, one set per broker.
	Nodes []Node
	// PartitionSeries is how many partitions get series of their own
	// (cost, and lag per broker); 0, the default, exports none, since a
	// broker may lead thousands. The first partitions the ledger saw (for
	// lag, the first in topic and partition order) are chosen, so the set
	// stays the same from scrape to scrape. A partition's series are
	// labelled by topic name (metering.TopicName) and partition number:
	// whatever shares those (the incarnations of a topic created again
	// under its old name, which Kafka tells apart by topic id, or a topic
	// named by its id alone whose hex form is another topic's name) is
	// one series, the sum of theirs.
	PartitionSeries int
	// MaxTopics bounds the topics with cost series of their own; the cost
	// of later ones is exported under topic metering.OverflowTopic. 0
	// means DefaultMaxTopics.
	MaxTopics int
}

// Collector is a prometheus.Collector over a Meter and Nodes. Everything is
// read at scrape time: nothing it exports costs the replication path more
// than the Meter's own counting.
type Collector struct {
	cfg Config
}

// New returns a Collector, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Collector, error) {
	switch {
	case cfg.Meter == nil && len(cfg.Nodes) == 0:
		return nil, fmt.Errorf("%w: neither a Meter nor Nodes", ErrInvalidConfig)
	case cfg.PartitionSeries < 0:
		return nil, fmt.Errorf("%w: PartitionSeries is %d, must not be negative", ErrInvalidConfig, cfg.PartitionSeries)
	case cfg.MaxTopics < 0:
		return nil, fmt.Errorf("%w: MaxTopics is %d, must not be negative", ErrInvalidConfig, cfg.MaxTopics)
	}
	seen := map[string]bool{}
	for i, n := range cfg.Nodes {
		if n.Engine == nil {
			return nil, fmt.Errorf("%w: Nodes[%d] has no Engine", ErrInvalidConfig, i)
		}
		if !utf8.ValidString(n.Broker) {
			return nil, fmt.Errorf("%w: Nodes[%d].Broker %q is not valid UTF-8, as a label value must be", ErrInvalidConfig, i, n.Broker)
		}
		if seen[n.Broker] {
			return nil, fmt.Errorf("%w: broker %q appears twice in Nodes", ErrInvalidConfig, n.Broker)
		}
		seen[n.Broker] = true
	}
	if cfg.MaxTopics == 0 {
		cfg.MaxTopics = DefaultMaxTopics
	}
	cfg.Nodes = slices.Clone(cfg.Nodes)
	return &Collector{cfg: cfg}, nil
}

// metric describes one exported metric; its doc line is the table in
// doc.go.
type metric struct {
	name, help string
	labels     []string
	kind       prometheus.ValueType // GaugeValue, CounterValue; UntypedValue marks a histogram
	from       source
}

const histogram = prometheus.UntypedValue

// source is what a metric is read from.
type source uint8

const (
	fromMeter source = iota
	fromNode
	fromCollector // always exported
)

var metrics = []metric{
	{"activetier_store_requests_total", "Object store requests made, failed ones included, by operation.", []string{"op"}, prometheus.CounterValue, fromMeter},
	{"activetier_store_errors_total", "Object store requests that failed, by operation and kind of error.", []string{"op", "kind"}, prometheus.CounterValue, fromMeter},
	{"activetier_store_request_duration_seconds", "Time per object store request (put: upload, get: fetch), by operation.", []string{"op"}, histogram, fromMeter},
	{"activetier_store_uploaded_bytes_total", "Body bytes of every PUT made.", nil, prometheus.CounterValue, fromMeter},
	{"activetier_store_downloaded_bytes_total", "Bytes returned by successful range GETs.", nil, prometheus.CounterValue, fromMeter},
	{"activetier_metadata_requests_total", "Metadata log calls made, by operation.", []string{"op"}, prometheus.CounterValue, fromMeter},
	{"activetier_metadata_errors_total", "Metadata log calls that failed, by operation and kind of error.", []string{"op", "kind"}, prometheus.CounterValue, fromMeter},
	{"activetier_metadata_request_duration_seconds", "Time per metadata log call, by operation.", []string{"op"}, histogram, fromMeter},
	{"activetier_metadata_appended_bytes_total", "Bytes of metadata messages appended.", nil, prometheus.CounterValue, fromMeter},
	{"activetier_metadata_read_bytes_total", "Bytes of metadata messages read.", nil, prometheus.CounterValue, fromMeter},
	{"activetier_cost_usd_total", "Cost attributed to each topic, in US dollars, by bill line (put, get, upload, retrieval, metadata, control).", []string{"topic", "line"}, prometheus.CounterValue, fromMeter},
	{"activetier_partition_cost_usd_total", "Cost attributed to each partition, by bill line; only with PartitionSeries.", []string{"topic", "partition", "line"}, prometheus.CounterValue, fromMeter},

	{"activetier_produced_bytes_total", "Batch bytes appended to the leader engine.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_objects_total", "Combined objects stored by the leader engine.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_object_bytes_total", "Bytes of the combined objects stored.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_objects_deleted_total", "Combined objects removed by garbage collection.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_retries_total", "Failed attempts that were retried, by kind (upload, publish).", []string{"broker", "kind"}, prometheus.CounterValue, fromNode},
	{"activetier_replicated_bytes_total", "Bytes the follower engine appended to the local log.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_applied_entries_total", "Metadata entries (or parts) the follower engine applied.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_fetch_errors_total", "Failed section fetches, by kind (corrupt, not_found, other).", []string{"broker", "kind"}, prometheus.CounterValue, fromNode},
	{"activetier_truncations_total", "Local log truncations on divergence from the leader.", []string{"broker"}, prometheus.CounterValue, fromNode},
	{"activetier_digest_checks_total", "Comparisons of the local log's rolling digest with one its leader published, by result (match, mismatch).", []string{"broker", "result"}, prometheus.CounterValue, fromNode},
	{"activetier_buffered_bytes", "Bytes appended to the leader engine and not yet published.", []string{"broker"}, prometheus.GaugeValue, fromNode},
	{"activetier_uploads_in_flight", "Objects cut and not yet stored.", []string{"broker"}, prometheus.GaugeValue, fromNode},
	{"activetier_held_entries", "Entries the follower engine holds, waiting for a gap, a marker or a retry.", []string{"broker"}, prometheus.GaugeValue, fromNode},
	{"activetier_lag_offsets", "Offsets announced in metadata and not yet applied, over the partitions followed.", []string{"broker"}, prometheus.GaugeValue, fromNode},
	{"activetier_partition_lag_offsets", "Offsets announced and not yet applied, per partition; only with PartitionSeries.", []string{"broker", "topic", "partition"}, prometheus.GaugeValue, fromNode},
	{"activetier_degraded", "1 while uploads or publishes have failed for longer than DegradedAfter: replicate the ordinary way.", []string{"broker"}, prometheus.GaugeValue, fromNode},
	{"activetier_replication_lag_seconds", "Time from a section's newest record timestamp to its append on this follower.", []string{"broker"}, histogram, fromNode},
	{"activetier_scrape_skipped_series", "Series this scrape left out because a label value was not valid UTF-8 (a topic name no Kafka broker accepts).", nil, prometheus.GaugeValue, fromCollector},
}

// descs maps each metric's name to its Desc.
var descs = func() map[string]*prometheus.Desc {
	m := make(map[string]*prometheus.Desc, len(metrics))
	for _, d := range metrics {
		m[d.name] = prometheus.NewDesc(d.name, d.help, d.labels, nil)
	}
	return m
}()

// MetricNames returns the name of every metric a Collector may export, as
// documented in the package's table.
func MetricNames() []string {
	names := make([]string, len(metrics))
	for i, m := range metrics {
		names[i] = m.name
	}
	return names
}

// Describe sends the Desc of every metric the Collector may export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range metrics {
		if m.from == fromCollector || (m.from == fromNode && len(c.cfg.Nodes) > 0) || (m.from == fromMeter && c.cfg.Meter != nil) {
			ch <- descs[m.name]
		}
	}
}

// Collect reads the Meter and the Nodes and sends their metrics. A series
// that cannot be made (a label value that is not valid UTF-8, as an
// Engine may report for a partition it was never asked about) is left
// out and counted, rather than failing the whole scrape, as an invalid
// metric or a panic in Collect would.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := &scrape{ch: ch}
	if c.cfg.Meter != nil {
		c.collectMeter(s, c.cfg.Meter.Snapshot())
	}
	for _, n := range c.cfg.Nodes {
		c.collectNode(s, n.Broker, n.Engine.Stats(), n.Engine.Health())
	}
	s.send("activetier_scrape_skipped_series", prometheus.GaugeValue, float64(s.skipped))
}

// scrape is one Collect call: where its metrics go and how many it left
// out. Each call has its own, so concurrent scrapes share nothing.
type scrape struct {
	ch      chan<- prometheus.Metric
	skipped int
}

func (s *scrape) send(name string, kind prometheus.ValueType, v float64, labels ...string) {
	s.metric(prometheus.NewConstMetric(descs[name], kind, v, labels...))
}

// metric sends m, or counts it as skipped if it could not be made.
func (s *scrape) metric(m prometheus.Metric, err error) {
	if err != nil {
		s.skipped++
		return
	}
	s.ch <- m
}

// partKey is how a partition's series are labelled.
type partKey struct {
	topic string
	part  int32
}

func keyOf(tp metadata.TopicPartition) partKey { return partKey{metering.TopicName(tp), tp.Partition} }

func (k partKey) compare(o partKey) int {
	return cmp.Or(cmp.Compare(k.topic, o.topic), cmp.Compare(k.part, o.part))
}

func (c *Collector) collectMeter(out *scrape, s metering.Snapshot) {
	for _, group := range []struct {
		prefix string
		ops    []metering.OpStats
	}{{"activetier_store_", s.Store}, {"activetier_metadata_", s.Log}} {
		for _, op := range group.ops {
			out.send(group.prefix+"requests_total", prometheus.CounterValue, float64(op.Requests), string(op.Op))
			for _, k := range metering.ErrorKinds() {
				if n := op.Errors[k]; n > 0 {
					out.send(group.prefix+"errors_total", prometheus.CounterValue, float64(n), string(op.Op), string(k))
				}
			}
			out.metric(latencyHistogram(descs[group.prefix+"request_duration_seconds"], op.Latency, string(op.Op)))
		}
	}
	out.send("activetier_store_uploaded_bytes_total", prometheus.CounterValue, float64(s.BytesUp))
	out.send("activetier_store_downloaded_bytes_total", prometheus.CounterValue, float64(s.BytesDown))
	out.send("activetier_metadata_appended_bytes_total", prometheus.CounterValue, float64(s.MetadataAppendedBytes))
	out.send("activetier_metadata_read_bytes_total", prometheus.CounterValue, float64(s.MetadataReadBytes))
	c.collectLedger(out, s.Ledger)
}

// lines names a Breakdown's lines as the cost metrics label them.
func lines(b costmodel.Breakdown) [6]struct {
	name string
	usd  float64
} {
	return [6]struct {
		name string
		usd  float64
	}{{"put", b.PutUSD}, {"get", b.GetUSD}, {"upload", b.UploadUSD}, {"retrieval", b.RetrievalUSD}, {"metadata", b.MetadataUSD}, {"control", b.ControlUSD}}
}

func (c *Collector) collectLedger(out *scrape, l metering.Ledger) {
	// Topics in the order the ledger first saw them, the first MaxTopics
	// under their names and the rest under the overflow row's.
	var order []string
	shares := map[string]costmodel.Share{}
	add := func(topic string, s costmodel.Share) {
		if _, ok := shares[topic]; !ok {
			if len(order) >= c.cfg.MaxTopics {
				topic = metering.OverflowTopic
			}
			if _, ok := shares[topic]; !ok {
				order = append(order, topic)
			}
		}
		shares[topic] = shares[topic].Add(s)
	}
	// The partitions with series of their own, in the ledger's order,
	// those labelled alike summed.
	var parts []partKey
	partShares := map[partKey]costmodel.Share{}
	for i, p := range l.Partitions {
		k := keyOf(p.Partition)
		add(k.topic, p.Share)
		if i < c.cfg.PartitionSeries {
			if _, ok := partShares[k]; !ok {
				parts = append(parts, k)
			}
			partShares[k] = partShares[k].Add(p.Share)
		}
	}
	for _, k := range parts {
		b, _ := costmodel.PriceShare(l.Prices, partShares[k])
		part := strconv.Itoa(int(k.part))
		for _, ln := range lines(b) {
			out.send("activetier_partition_cost_usd_total", prometheus.CounterValue, ln.usd, k.topic, part, ln.name)
		}
	}
	for _, row := range []metering.Charge{l.Overflow, l.Unattributed} {
		if row.Share != (costmodel.Share{}) {
			add(row.Partition.Topic, row.Share)
		}
	}
	for _, topic := range order {
		b, _ := costmodel.PriceShare(l.Prices, shares[topic]) // the Meter validated the prices
		for _, ln := range lines(b) {
			out.send("activetier_cost_usd_total", prometheus.CounterValue, ln.usd, topic, ln.name)
		}
	}
}

func (c *Collector) collectNode(out *scrape, broker string, s walstore.NodeStats, h walstore.Health) {
	ls, fs := s.Leader, s.Follower
	counter := func(name string, v uint64, labels ...string) {
		out.send(name, prometheus.CounterValue, float64(v), append([]string{broker}, labels...)...)
	}
	gauge := func(name string, v float64, labels ...string) {
		out.send(name, prometheus.GaugeValue, v, append([]string{broker}, labels...)...)
	}
	counter("activetier_produced_bytes_total", ls.AppendedBytes)
	counter("activetier_objects_total", ls.Objects)
	counter("activetier_object_bytes_total", ls.ObjectBytes)
	counter("activetier_objects_deleted_total", ls.ObjectsDeleted)
	counter("activetier_retries_total", ls.UploadRetries, "upload")
	counter("activetier_retries_total", ls.PublishRetries, "publish")
	counter("activetier_replicated_bytes_total", fs.AppliedBytes)
	counter("activetier_applied_entries_total", fs.Applied)
	counter("activetier_fetch_errors_total", fs.Corrupt, "corrupt")
	counter("activetier_fetch_errors_total", fs.NotFound, "not_found")
	counter("activetier_fetch_errors_total", fs.FetchErrors-min(fs.FetchErrors, fs.Corrupt+fs.NotFound), "other")
	counter("activetier_truncations_total", fs.Truncations)
	counter("activetier_digest_checks_total", fs.DigestChecks-min(fs.DigestChecks, fs.DigestMismatches), "match")
	counter("activetier_digest_checks_total", fs.DigestMismatches, "mismatch")
	gauge("activetier_buffered_bytes", float64(ls.BufferedBytes))
	gauge("activetier_uploads_in_flight", float64(ls.UploadsInFlight))
	gauge("activetier_held_entries", float64(fs.Held))
	degraded := 0.0
	if h.Degraded {
		degraded = 1
	}
	gauge("activetier_degraded", degraded)
	var lag int64
	for _, n := range fs.Lag {
		lag += n
	}
	gauge("activetier_lag_offsets", float64(lag))
	if c.cfg.PartitionSeries > 0 {
		type row struct {
			k partKey
			n int64
		}
		rows := make([]row, 0, len(fs.Lag))
		for tp, n := range fs.Lag {
			rows = append(rows, row{keyOf(tp), n})
		}
		slices.SortFunc(rows, func(a, b row) int { return a.k.compare(b.k) })
		// Partitions labelled alike (incarnations of one topic name),
		// adjacent once sorted, are one series, their sum, as in the
		// total above.
		for i, series := 0, 0; i < len(rows) && series < c.cfg.PartitionSeries; series++ {
			k, n := rows[i].k, int64(0)
			for ; i < len(rows) && rows[i].k == k; i++ {
				n += rows[i].n
			}
			gauge("activetier_partition_lag_offsets", float64(n), k.topic, strconv.Itoa(int(k.part)))
		}
	}
	out.metric(engineHistogram(descs["activetier_replication_lag_seconds"], fs.ApplyLag, broker))
}
