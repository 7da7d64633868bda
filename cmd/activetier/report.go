package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/walstore"
)

// demoReport is the demo's closing report, printed as a table or as JSON.
type demoReport struct {
	// The run's settings.
	Brokers          int     `json:"brokers"`
	AZs              int     `json:"azs"`
	Topics           int     `json:"topics"`
	Partitions       int     `json:"partitions"`
	RF               int     `json:"rf"`
	DurationS        float64 `json:"duration_s"`
	RateMBPerSec     float64 `json:"rate_mb_per_sec"`
	IntervalMS       float64 `json:"interval_ms"`
	ObjectBytesLimit int64   `json:"object_bytes_limit"`
	Codec            string  `json:"codec"`
	Profile          string  `json:"profile"`
	Seed             uint64  `json:"seed"`

	// What was produced: by the leaders' count, what broker-to-broker
	// replication would have copied to every follower.
	BytesProduced    int64   `json:"bytes_produced"`
	BatchesProduced  int64   `json:"batches_produced"`
	RecordsProduced  int64   `json:"records_produced"`
	ProducedMBPerSec float64 `json:"produced_mb_per_sec"`

	// What the followers applied, republished data included.
	BytesReplicated uint64 `json:"bytes_replicated"`
	EntriesApplied  uint64 `json:"entries_applied"`
	Truncations     uint64 `json:"truncations"`
	EntriesDropped  uint64 `json:"entries_dropped"`
	FetchErrors     uint64 `json:"fetch_errors"`

	// The object store's bill: requests as memstore counted them, or as
	// the S3 stores' HTTP clients sent them (retries included).
	Objects        uint64 `json:"objects"`
	ObjectsDeleted uint64 `json:"objects_deleted"`
	Puts           int64  `json:"puts"`
	Gets           int64  `json:"gets"`
	Deletes        int64  `json:"deletes"`
	Lists          int64  `json:"lists"`
	// FailedRequests counts the requests the store failed (answered with
	// an error, or none, while their caller waited); GivenUpRequests those
	// whose caller stopped waiting first: a hedge's loser cancelled, an
	// attempt past the engine's own timeout, a request in flight when a
	// broker stopped. Both are billed; the engines retry either as they
	// need. In memory memstore counts both as failed (GivenUpRequests 0).
	FailedRequests  int64 `json:"failed_requests"`
	GivenUpRequests int64 `json:"given_up_requests"`
	// PutOutcomes is how each PUT ended, on a backend the demo counts
	// itself (an S3 endpoint, --store); nil in memory.
	PutOutcomes     *putOutcomes `json:"put_outcomes,omitempty"`
	BytesUploaded   int64        `json:"bytes_uploaded"`
	BytesDownloaded int64        `json:"bytes_downloaded"`
	UploadRetries   uint64       `json:"upload_retries"`
	// Requests hedging sent again while the first was slow (included in
	// Puts and Gets), and what they cost at most (included in the cost).
	HedgedPuts   uint64  `json:"hedged_puts"`
	HedgedGets   uint64  `json:"hedged_gets"`
	HedgeCostUSD float64 `json:"hedge_cost_usd"`

	// The metadata log: bytes published (each message once), bytes the
	// followers read, and what crossed AZs (publish, the log's own
	// replication, reads), which is what the cost counts.
	MetadataBytes        int64 `json:"metadata_bytes"`
	MetadataBytesRead    int64 `json:"metadata_bytes_read"`
	MetadataMessages     int64 `json:"metadata_messages"`
	MetadataCrossAZBytes int64 `json:"metadata_cross_az_bytes"`
	// MetadataBreakdown splits MetadataBytes by what the bytes carry.
	MetadataBreakdown metadataBreakdown `json:"metadata_breakdown"`

	// Replication lag: from a record's produce time to a follower having
	// appended it, over every follower; upload latency per object.
	LagP50MS    float64 `json:"lag_p50_ms"`
	LagP99MS    float64 `json:"lag_p99_ms"`
	LagMaxMS    float64 `json:"lag_max_ms"`
	UploadP50MS float64 `json:"upload_p50_ms"`
	UploadP99MS float64 `json:"upload_p99_ms"`

	// The run's cost and that of replicating the same bytes broker to
	// broker across AZs at the same RF, and both for a month at this rate.
	Prices                 string           `json:"prices"`
	CostUSD                float64          `json:"cost_usd"`
	CrossAZCostUSD         float64          `json:"cross_az_cost_usd"`
	SavingsRatio           float64          `json:"savings_ratio"`
	CostUSDPerMonth        float64          `json:"cost_usd_per_month"`
	CrossAZCostUSDPerMonth float64          `json:"cross_az_cost_usd_per_month"`
	Cost                   comparisonJSON   `json:"cost"`
	Failover               *failover        `json:"failover,omitempty"`
	usage                  costmodel.Usage  // what price charges for
	prices                 costmodel.Prices // the list it uses

	// Comparison says what the two paths are compared on. Broker-to-broker
	// replication copies batches as producers sent them, so it is priced
	// on the produced bytes compressed with the sections' codec (producers
	// with compression.type set to it), at ProducerCompressionRatio
	// measured on a sample of the batches: like with like.
	// SavingsRatioUncompressed is the saving against replicating the
	// batches uncompressed, as they were generated: not like with like
	// unless the codec is none.
	Comparison               string  `json:"comparison"`
	ProducerCompressionRatio float64 `json:"producer_compression_ratio"`
	BytesProducedCompressed  int64   `json:"bytes_produced_compressed"`
	SavingsRatioUncompressed float64 `json:"savings_ratio_uncompressed_baseline"`

	// Ledger is the run's cost by topic and partition.
	Ledger *ledgerJSON `json:"ledger"`
	// timeline is the run sampled over time, and marks its moments, for
	// --report.
	timeline []timelineSample
	marks    []timelineMark

	// PricesNote says what the price list leaves out, if anything.
	PricesNote string `json:"prices_note,omitempty"`

	// S3 says where the objects were, for a run against an S3 endpoint.
	S3 *s3Report `json:"s3,omitempty"`
	// Store says where the objects were, for a run with --store.
	Store *storeReport `json:"store,omitempty"`
	// cleanupErr is why deleting what the run left on S3 failed.
	cleanupErr error

	// The end state, after the drain: every live follower's log compared
	// with its leader's, byte for byte.
	DrainMS float64 `json:"drain_ms"`
	// DrainTimedOut: --drain-timeout ran out with followers still behind.
	DrainTimedOut       bool `json:"drain_timed_out"`
	FollowersConsistent bool `json:"followers_consistent"`
	ReplicasCompared    int  `json:"replicas_compared"`
	ReplicasDiverged    int  `json:"replicas_diverged"`
	// Diverged describes the first maxDiverged differences.
	Diverged []string `json:"diverged,omitempty"`
	// Digests are the replicas' checks of their logs' rolling digests
	// against those the leaders published, followers' and direct
	// readers' together: any mismatch makes the run inconsistent, whatever
	// the log comparison finds.
	Digests digestsReport `json:"digests"`
	// Consistent is the run's verdict: the followers' logs equal their
	// leaders' (FollowersConsistent), the direct readers' too
	// (ReadersConsistent, if any), and no digest differed.
	Consistent bool `json:"consistent"`

	// Readers are the direct consumer readers of --readers, and whether
	// each yielded exactly its partitions' committed logs.
	Readers           *readersReport `json:"readers,omitempty"`
	ReadersConsistent *bool          `json:"readers_consistent,omitempty"`
	// The process's CPU time from the start of producing to the end of the
	// drain, harness included, and its peak resident set (0 where not
	// measured).
	CPUSeconds   float64 `json:"cpu_s"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// CPUSplit is CPUSeconds's profiled part by whose it was (cpusplit.go
	// says how), nil with CPUSplitNote saying why when the profile could
	// not be taken; cpuProfile is that profile, for --cpuprofile.
	CPUSplit     *cpuSplit `json:"cpu_split,omitempty"`
	CPUSplitNote string    `json:"cpu_split_note,omitempty"`
	cpuProfile   *profile.Profile
	// CPUFloor is the least CPU replicating the run's bytes could take,
	// measured after the run on its first batches, and the engines' CPU
	// against it.
	CPUFloor *cpuFloor `json:"cpu_floor"`
}

// digestsReport is the run's digest checks.
type digestsReport struct {
	// Checks counts comparisons of a replica's rolling digest with the
	// one a leader published at the same offset, Mismatches those that
	// differed, Taken the values replicas took unchecked (after a restart,
	// say) to check what they applied next.
	Checks     uint64 `json:"checks"`
	Mismatches uint64 `json:"mismatches"`
	Taken      uint64 `json:"taken"`
	// MismatchList are the first maxMismatches mismatches: followers'
	// first, then direct readers'.
	MismatchList []digestMismatch `json:"mismatch_list"`
	// Corrupted is what --corrupt-follower changed.
	Corrupted *corruption `json:"corrupted,omitempty"`
}

// putOutcomes splits a run's PUTs (Stored+Failed+GivenUp is every one).
// Each object was stored by one PUT; another PUT stored too is the twin of
// a hedge, whose object no entry names and Sweep deletes.
type putOutcomes struct {
	// Stored PUTs were answered with success while their caller waited.
	Stored int64 `json:"stored"`
	// Failed PUTs are the store's failures, in FailedRequests.
	Failed int64 `json:"failed"`
	// GivenUp PUTs ended after their caller stopped waiting, in
	// GivenUpRequests: an attempt its hedge beat (or that beat its hedge
	// while the hedge was under way), or one past the engine's timeout.
	GivenUp int64 `json:"given_up"`
}

func newDemoReport(o *demoOptions, s *sim, p *producer, m *metering.Meter, produced, drain time.Duration, fo *failover) *demoReport {
	r := &demoReport{
		Brokers: s.cfg.brokers, AZs: len(s.cfg.azs), Topics: s.cfg.topics, Partitions: s.cfg.partitions, RF: s.cfg.rf,
		DurationS: o.duration.Seconds(), RateMBPerSec: o.rate, IntervalMS: ms(o.interval),
		ObjectBytesLimit: int64(o.objectBytes), Codec: s.cfg.codec.String(), Profile: o.profile, Seed: o.seed,
		BytesProduced: p.bytes.Load(), BatchesProduced: p.batches.Load(), RecordsProduced: p.records.Load(),
		DrainMS: ms(drain), Failover: fo,
	}
	r.ProducedMBPerSec = float64(r.BytesProduced) / 1e6 / produced.Seconds()
	var lag, upload walstore.Histogram
	for _, st := range s.nodeStats() {
		ls := st.Leader
		r.Objects += ls.Objects
		r.ObjectsDeleted += ls.ObjectsDeleted
		r.UploadRetries += ls.UploadRetries
		r.HedgedPuts += ls.UploadHedges
		upload.Merge(&ls.UploadLatency)
		if fo != nil {
			fo.RepublishedEntries += ls.Republished
		}
		fs := st.Follower
		r.BytesReplicated += fs.AppliedBytes
		r.EntriesApplied += fs.Applied
		r.Truncations += fs.Truncations
		r.EntriesDropped += fs.Dropped
		r.FetchErrors += fs.FetchErrors
		r.HedgedGets += fs.Hedges
		lag.Merge(&fs.ApplyLag)
	}
	r.LagP50MS, r.LagP99MS, r.LagMaxMS = ms(lag.Quantile(0.5)), ms(lag.Quantile(0.99)), ms(lag.Max)
	r.UploadP50MS, r.UploadP99MS = ms(upload.Quantile(0.5)), ms(upload.Quantile(0.99))

	st := s.objects.requests()
	r.Puts, r.Gets, r.Deletes, r.Lists, r.FailedRequests = st.puts, st.gets, st.deletes, st.lists, st.failed
	r.GivenUpRequests = st.givenUp
	if st.outcomes {
		r.PutOutcomes = &putOutcomes{Stored: st.putsStored, Failed: st.putsFailed, GivenUp: st.putsGivenUp}
	}
	r.BytesUploaded, r.BytesDownloaded = st.bytesUp, st.bytesDown

	ml := s.meta.Stats().Total
	r.MetadataBytes, r.MetadataBytesRead, r.MetadataMessages = ml.AppendedBytes, ml.BytesRead, ml.Appends
	r.prices = m.Prices()
	r.usage = usageOf(s, p, m)
	r.MetadataCrossAZBytes = r.usage.MetadataBytes
	r.ProducerCompressionRatio = p.sample.ratio()
	r.BytesProducedCompressed = r.usage.ProducedBytes
	r.Comparison = comparisonOf(s.cfg.codec.String(), r.ProducerCompressionRatio)
	return r
}

// usageOf is the run's usage so far: object store requests and bytes as
// the backend counted them; metadata and control traffic as m, around the
// brokers' metadata log, measured them message by message (each published
// byte crossing to the log's partition leader and its other replicas, each
// byte read once more, as on a Kafka topic at costmodel.DefaultMetadataRF;
// each entry a follower reads standing for one fetch's worth of offsets
// sent to its leader). Broker-to-broker replication is priced on the
// produced bytes as producers compressing with the sections' codec would
// have sent them: like with like.
func usageOf(s *sim, p *producer, m *metering.Meter) costmodel.Usage {
	st := s.objects.requests()
	mu := m.Usage()
	return costmodel.Usage{
		Puts: st.puts, Gets: st.gets, BytesUp: st.bytesUp, BytesDown: st.bytesDown,
		MetadataBytes: mu.MetadataBytes, ControlBytes: mu.ControlBytes,
		ProducedBytes: int64(float64(p.bytes.Load()) * p.sample.ratio()),
		RF:            s.cfg.rf,
	}
}

// comparisonOf says, in the report's words, what the two paths are
// compared on.
func comparisonOf(codec string, ratio float64) string {
	if codec == "none" {
		return "like for like: objects and broker-to-broker batches both uncompressed"
	}
	// Kafka producers have zstd; S2 extends Snappy, the nearest they have.
	kafka := map[string]string{"zstd": "zstd", "s2": "snappy"}[codec]
	return fmt.Sprintf("like for like: objects with %s sections against broker-to-broker batches compressed with %s "+
		"by their producers (as with compression.type=%s; %.1f%% of their size, measured on 1 batch in %d)",
		codec, codec, kafka, 100*ratio, sampleEvery)
}

// price fills the cost fields from the run's usage.
func (r *demoReport) price() error {
	c, err := costmodel.RunCost(r.prices, r.usage)
	if err != nil {
		return err
	}
	r.Prices, r.PricesNote = r.prices.Name, r.prices.Note
	r.Cost = newComparisonJSON(c)
	r.CostUSD, r.CrossAZCostUSD, r.SavingsRatio = c.ActiveTier.TotalUSD, c.BrokerToBroker.TotalUSD, c.SavingsRatio
	raw := r.usage
	raw.ProducedBytes = r.BytesProduced
	u, err := costmodel.RunCost(r.prices, raw)
	if err != nil {
		return err
	}
	r.SavingsRatioUncompressed = u.SavingsRatio
	// A hedge moves what the request it hedges moves, at most: the
	// average PUT's and GET's bytes.
	avg := func(total, n int64) int64 { return total / max(n, 1) }
	h, err := costmodel.HedgeCost(r.prices, int64(r.HedgedPuts), int64(r.HedgedGets),
		int64(r.HedgedPuts)*avg(r.BytesUploaded, r.Puts), int64(r.HedgedGets)*avg(r.BytesDownloaded, r.Gets))
	if err != nil {
		return err
	}
	r.HedgeCostUSD = h.TotalUSD
	month := c.Scale(costmodel.SecondsPerMonth / r.DurationS)
	r.CostUSDPerMonth, r.CrossAZCostUSDPerMonth = month.ActiveTier.TotalUSD, month.BrokerToBroker.TotalUSD
	return nil
}

func (r *demoReport) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "produced\t%s in %s batches of %s records (%s/s)\n",
		humanBytes(float64(r.BytesProduced)), thousands(r.BatchesProduced), thousands(r.RecordsProduced), humanBytes(r.ProducedMBPerSec*1e6))
	fmt.Fprintf(tw, "replicated\t%s applied by followers in %s entries\n", humanBytes(float64(r.BytesReplicated)), thousands(int64(r.EntriesApplied)))
	fmt.Fprintf(tw, "objects\t%s uploaded (%s, %s of the bytes produced, codec %s), %s deleted once applied\n",
		thousands(int64(r.Objects)), humanBytes(float64(r.BytesUploaded)), percent(r.BytesUploaded, r.BytesProduced), r.Codec, thousands(int64(r.ObjectsDeleted)))
	requests := fmt.Sprintf("%s PUTs, %s GETs (%s downloaded), %s DELETEs", thousands(r.Puts), thousands(r.Gets), humanBytes(float64(r.BytesDownloaded)), thousands(r.Deletes))
	if r.Lists > 0 {
		requests += fmt.Sprintf(", %s LISTs", thousands(r.Lists))
	}
	if r.FailedRequests > 0 {
		requests += fmt.Sprintf("; %s failed", thousands(r.FailedRequests))
	}
	if r.GivenUpRequests > 0 {
		requests += fmt.Sprintf("; %s given up on", thousands(r.GivenUpRequests))
	}
	fmt.Fprintf(tw, "requests\t%s\n", requests)
	fmt.Fprintf(tw, "hedged\t%s PUTs (%s of PUTs), %s GETs (%s of GETs) sent again while the first was slow: at most $%.6f, in the cost below\n",
		thousands(int64(r.HedgedPuts)), percent(int64(r.HedgedPuts), r.Puts), thousands(int64(r.HedgedGets)), percent(int64(r.HedgedGets), r.Gets), r.HedgeCostUSD)
	fmt.Fprintf(tw, "metadata\t%s published in %s messages, %s read by followers\n",
		humanBytes(float64(r.MetadataBytes)), thousands(r.MetadataMessages), humanBytes(float64(r.MetadataBytesRead)))
	fmt.Fprintf(tw, "lag\tp50 %.0f ms, p99 %.0f ms, max %.0f ms (produce to follower append); upload p50 %.0f ms, p99 %.0f ms\n",
		r.LagP50MS, r.LagP99MS, r.LagMaxMS, r.UploadP50MS, r.UploadP99MS)
	if fo := r.Failover; fo != nil {
		fmt.Fprintf(tw, "failover\t%s down at %.1fs: broker(s) %s crashed; %d partitions led again at epoch %d after %.0f ms offline; %d entries republished (done after %.0f ms)\n",
			fo.AZ, fo.AtS, joinIDs(fo.CrashedBrokers), fo.PartitionsMoved, fo.NewEpoch, fo.OfflineMS, fo.RepublishedEntries, fo.RepublishMS)
		fmt.Fprintf(tw, "\t%s records died with the crashed leaders (acks=1: taken, not yet replicated)\n", thousands(fo.RecordsLost))
	}
	if s3 := r.S3; s3 != nil {
		fate := "deleted"
		switch {
		case s3.CleanupError != "":
			fate = "NOT deleted: " + s3.CleanupError
		case s3.ObjectsKept:
			fate = "kept"
		}
		fmt.Fprintf(tw, "s3\t%s under %s: %d objects left after garbage collection, %s\n", s3.Endpoint, s3.KeyPrefix, s3.ObjectsLeft, fate)
	}
	if st := r.Store; st != nil {
		fate := "removed"
		switch {
		case st.CleanupError != "":
			fate = "NOT removed: " + st.CleanupError
		case st.ObjectsKept:
			fate = "kept"
		}
		fmt.Fprintf(tw, "%s\t%s: %d objects left after garbage collection, %s\n", st.Kind, st.Location, st.ObjectsLeft, fate)
	}
	consistent := "yes"
	if !r.FollowersConsistent {
		consistent = fmt.Sprintf("NO: %d of them differ", r.ReplicasDiverged)
		if r.DrainTimedOut {
			consistent += " (the drain timed out with followers still catching up: see --drain-timeout)"
		}
	}
	fmt.Fprintf(tw, "consistent\t%s: %d follower logs compared with their leader's, byte for byte, after a %.0f ms drain\n",
		consistent, r.ReplicasCompared, r.DrainMS)
	for _, d := range r.Diverged {
		fmt.Fprintf(tw, "\t%s\n", d)
	}
	for _, l := range r.Digests.lines() {
		fmt.Fprintf(tw, "%s\t%s\n", l.Name, l.Value)
	}
	for _, l := range r.cpuLines() {
		fmt.Fprintf(tw, "%s\t%s\n", l.Name, l.Value)
	}
	fmt.Fprintln(tw)

	fmt.Fprintf(tw, "cost of this run (%s)\tactivetier\tcross-AZ replication\n", r.Prices)
	for _, l := range costLines(r) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", l.Name, l.AT, l.BB)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.PricesNote != "" {
		if _, err := fmt.Fprintf(w, "\nprices: %s.\n", r.PricesNote); err != nil {
			return err
		}
	}
	if err := r.Ledger.writeText(w); err != nil {
		return err
	}
	if err := r.Readers.writeText(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s.\n(%s", headline(r.SavingsRatio, "replicating the same batches across AZs"), r.Comparison)
	if r.Codec != "none" {
		_, err = fmt.Fprintf(w, "; against the batches uncompressed, as generated, it would be %s", lessOrMore(r.SavingsRatioUncompressed))
	}
	if err == nil {
		_, err = fmt.Fprintln(w, ".)")
	}
	return err
}

// lines are the digests' lines of the text and HTML reports: the totals,
// each mismatch listed, and what --corrupt-follower changed.
func (d *digestsReport) lines() []reportFact {
	verdict := "none differed"
	if d.Mismatches > 0 {
		verdict = fmt.Sprintf("NO: %s differed, the run is inconsistent", plural(int(d.Mismatches), "digest"))
	}
	out := []reportFact{{"digests", fmt.Sprintf("%s: %s checks against the leaders' published digests, %s taken unchecked (followers and direct readers)",
		verdict, thousands(int64(d.Checks)), thousands(int64(d.Taken)))}}
	for _, m := range d.MismatchList {
		out = append(out, reportFact{"", m.String()})
	}
	if c := d.Corrupted; c != nil {
		found := "reported as a digest mismatch"
		if !c.Detected {
			found = "NOT reported as a digest mismatch before --drain-timeout ran out"
		}
		out = append(out, reportFact{"corrupted", fmt.Sprintf("broker %d's log of %s returned a changed byte in the batch at offsets %d-%d, and it was restarted from it at %.1fs: %s",
			c.Broker, c.Partition, c.FirstOffset, c.LastOffset, c.AtS, found)})
	}
	return out
}

// headline is the report's last line: how much less (or more) activetier
// cost than the alternative.
func headline(ratio float64, than string) string {
	return "activetier cost " + lessOrMore(ratio) + " than " + than
}

func lessOrMore(ratio float64) string {
	if ratio >= 0 {
		return fmt.Sprintf("%.1f%% less", 100*ratio)
	}
	return fmt.Sprintf("%.1f%% MORE", -100*ratio)
}

// plural is n of word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func percent(part, whole int64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole))
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
