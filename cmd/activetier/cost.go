package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/activetier/activetier/costmodel"
)

// costOptions are the flags of `activetier cost`.
type costOptions struct {
	mbPerSec           float64
	partitions         int
	rf                 int
	brokers            int
	leaders            int
	interval           time.Duration
	objectBytes        byteSize
	batchBytes         byteSize
	followersPerObject float64
	rangesPerFollower  float64
	retention          time.Duration
	metadataPartitions int
	waitFraction       float64
	waitCutDelay       time.Duration

	preset   string
	gib      bool
	override priceOverrides

	per           string
	json          bool
	plan          bool
	latencyBudget time.Duration
}

// priceOverrides are the price flags; only those given on the command line
// replace the preset's figures.
type priceOverrides struct {
	putPer1000, getPer1000, uploadPerGB, retrievalPerGB, storagePerGBMonth float64
	crossAZPerGB, crossAZOutPerGB, crossAZInPerGB                          float64
}

// costFlagOf maps a cost model field name to the flag that sets it, so the
// model's validation speaks of what the user typed.
func costFlagOf(field string) (string, bool) {
	switch field {
	case "Workload.BytesPerSecond":
		return "mb-per-sec", true
	case "Workload.Partitions":
		return "partitions", true
	case "Workload.BatchBytes":
		return "batch-bytes", true
	case "Workload.RF":
		return "rf", true
	case "Workload.Brokers":
		return "brokers", true
	case "Workload.Leaders":
		return "leaders", true
	case "Workload.FollowersPerObject":
		return "followers-per-object", true
	case "Workload.RangesPerFollower":
		return "ranges-per-follower", true
	case "Workload.FlushInterval":
		return "interval", true
	case "Workload.MaxObjectBytes":
		return "object-bytes", true
	case "Workload.Retention":
		return "retention", true
	case "Workload.MetadataPartitions":
		return "metadata-partitions", true
	case "Workload.WaitFraction":
		return "wait-fraction", true
	case "Workload.WaitCutDelay":
		return "wait-cut-delay", true
	case "PlanRequest.P99Lag":
		return "latency-budget", true
	}
	return "", false
}

func costFlags() (*costOptions, *flag.FlagSet) {
	o := &costOptions{}
	fs := newFlagSet("cost")
	fs.Float64Var(&o.mbPerSec, "mb-per-sec", 30, "produced `MB/s` across the cluster, as stored (1 MB = 10^6 bytes)")
	fs.IntVar(&o.partitions, "partitions", 300, "partitions producing, spread evenly over the leaders")
	fs.IntVar(&o.rf, "rf", 3, "replication factor: RF-1 followers per partition, each in another AZ")
	fs.IntVar(&o.brokers, "brokers", 3, "brokers in the cluster")
	fs.IntVar(&o.leaders, "leaders", 0, "brokers leading the partitions (0: min(brokers, partitions))")
	fs.DurationVar(&o.interval, "interval", 250*time.Millisecond, "flush interval: the longest a batch waits for its object (with --plan: the longest considered, if given)")
	fs.Var(&o.objectBytes, "object-bytes", "cut an object early at this `size` (0: no limit; e.g. 4MiB)")
	fs.Var(&o.batchBytes, "batch-bytes", "mean producer batch `size`; partitions without a batch in a window are absent from its object (0: assume every partition in every object)")
	fs.Float64Var(&o.followersPerObject, "followers-per-object", 0, "distinct brokers reading each object (0: derived from random placement)")
	fs.Float64Var(&o.rangesPerFollower, "ranges-per-follower", 0, "range GETs per follower per object (0: 1, sections grouped by follower)")
	fs.DurationVar(&o.retention, "retention", 0, "how long objects stay in the bucket (0: deleted once applied; storage left out)")
	fs.IntVar(&o.metadataPartitions, "metadata-partitions", 0, "metadata log partitions (0: one per broker)")
	fs.Float64Var(&o.waitFraction, "wait-fraction", 0, "fraction of appends whose producers wait for their acknowledgement (acks=all), cut for within --wait-cut-delay")
	fs.DurationVar(&o.waitCutDelay, "wait-cut-delay", 0, "the leader's bound on cutting for a waited append (NodeConfig.WaitCutDelay; 0: cut at --interval)")

	fs.StringVar(&o.preset, "preset", "s3express", "price list: "+strings.Join(presetChoices(), ", "))
	fs.BoolVar(&o.gib, "gib", false, "quote per-GB prices per GiB (2^30 bytes), as an AWS bill does, instead of per 10^9 bytes")
	fs.Float64Var(&o.override.putPer1000, "put-per-1000", 0, "override: `USD` per 1000 PUT requests")
	fs.Float64Var(&o.override.getPer1000, "get-per-1000", 0, "override: `USD` per 1000 GET requests")
	fs.Float64Var(&o.override.uploadPerGB, "upload-per-gb", 0, "override: `USD` per GB uploaded to the object store")
	fs.Float64Var(&o.override.retrievalPerGB, "retrieval-per-gb", 0, "override: `USD` per GB retrieved from the object store")
	fs.Float64Var(&o.override.storagePerGBMonth, "storage-per-gb-month", 0, "override: `USD` per GB-month stored")
	fs.Float64Var(&o.override.crossAZPerGB, "cross-az-per-gb", 0, "override: cross-AZ transfer `USD` per GB in each direction (out and in)")
	fs.Float64Var(&o.override.crossAZOutPerGB, "cross-az-out-per-gb", 0, "override: cross-AZ `USD` per GB sent (after --cross-az-per-gb)")
	fs.Float64Var(&o.override.crossAZInPerGB, "cross-az-in-per-gb", 0, "override: cross-AZ `USD` per GB received (after --cross-az-per-gb)")

	fs.StringVar(&o.per, "per", "month", "period the costs are given for: second, hour, day or month (730 h)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	fs.BoolVar(&o.plan, "plan", false, "suggest the flush interval and object size that meet --latency-budget at the lowest cost")
	fs.DurationVar(&o.latencyBudget, "latency-budget", 200*time.Millisecond, "with --plan: the p99 replication lag allowed")
	return o, fs
}

// presetChoices are the names --preset accepts: each costmodel preset by its
// full name and by its store alone ("s3express" for "s3express-2025").
func presetChoices() []string {
	var out []string
	for _, name := range costmodel.PresetNames() {
		if short, _, ok := strings.Cut(name, "-"); ok {
			out = append(out, short)
		}
		out = append(out, name)
	}
	return slices.Compact(out)
}

// presetPrices resolves a --preset value. costmodel knows only the dated
// names; the store's name alone means the one dated list for that store.
func presetPrices(name string) (costmodel.Prices, error) {
	if p, err := costmodel.Preset(name); err == nil {
		return p, nil
	}
	var match []string
	for _, full := range costmodel.PresetNames() {
		if strings.HasPrefix(full, name+"-") {
			match = append(match, full)
		}
	}
	if len(match) != 1 {
		return costmodel.Prices{}, fmt.Errorf("unknown price list (want %s)", strings.Join(presetChoices(), ", "))
	}
	return costmodel.Preset(match[0])
}

// latencyFor is the latency model matching a price list's store.
func latencyFor(p costmodel.Prices) costmodel.Latency {
	if strings.HasPrefix(p.Name, "s3standard") {
		return costmodel.S3StandardLatency()
	}
	return costmodel.S3ExpressLatency()
}

func periodSeconds(per string) (float64, bool) {
	switch per {
	case "second":
		return 1, true
	case "hour":
		return 3600, true
	case "day":
		return costmodel.SecondsPerDay, true
	case "month":
		return costmodel.SecondsPerMonth, true
	}
	return 0, false
}

// Limits of cost's flags beyond those the cost model checks: far beyond any
// deployment, and low enough that no estimate overflows a float64 however
// the flags combine.
const (
	maxCostPartitions = 10_000_000
	maxCostBrokers    = 100_000
	maxPrice          = 1e6 // USD per unit, a million times today's prices
	// maxCostInterval bounds --interval: the model's cut interval, a
	// Duration, cannot hold the longest Duration once converted from
	// seconds.
	maxCostInterval = 24 * time.Hour
)

func runCost(_ context.Context, e env, args []string) error {
	o, fs := costFlags()
	if help, err := parseFlags(e, fs, "cost [flags]", args); help || err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := o.validate(fs); err != nil {
		return err
	}
	prices, err := o.prices(fs)
	if err != nil {
		return err
	}
	scale, ok := periodSeconds(o.per)
	if !ok {
		return flagError(fs, "per", "want second, hour, day or month")
	}
	w := o.workload()
	report := costReport{Period: o.per}
	if o.plan {
		if !isSet(fs, "interval") {
			w.FlushInterval = 0 // the planner's own limit
		}
		plan, err := costmodel.PlanWorkload(prices, costmodel.PlanRequest{Workload: w, P99Lag: o.latencyBudget, Latency: latencyFor(prices)})
		if err != nil {
			return modelError(fs, err, numericFlags(fs)...)
		}
		report.Plan = newPlanJSON(plan, o.latencyBudget)
		report.fill(prices, plan.Estimate, scale)
	} else {
		est, err := costmodel.WorkloadCost(prices, w)
		if err != nil {
			return modelError(fs, err, numericFlags(fs)...)
		}
		report.fill(prices, est, scale)
	}
	report.breakEven(prices, o.plan)

	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.writeText(e.stdout)
}

// validate checks what the cost model leaves to its caller: upper limits,
// and the throughput's lower one, below which it prints as 0 B/s.
func (o *costOptions) validate(fs *flag.FlagSet) error {
	switch {
	case o.partitions < 1 || o.partitions > maxCostPartitions:
		return flagError(fs, "partitions", fmt.Sprintf("must be between 1 and %d", maxCostPartitions))
	case o.brokers > maxCostBrokers:
		return flagError(fs, "brokers", fmt.Sprintf("must be at most %d", maxCostBrokers))
	case o.interval > maxCostInterval:
		return flagError(fs, "interval", "must be at most "+maxCostInterval.String())
	case o.rf > o.brokers:
		// The model would blame --brokers alone.
		return flagError(fs, "rf", fmt.Sprintf("must be at most --brokers (%d): replicas are on distinct brokers", o.brokers))
	case o.metadataPartitions > maxCostPartitions:
		return flagError(fs, "metadata-partitions", fmt.Sprintf("must be at most %d", maxCostPartitions))
	}
	return checkMBPerSec(fs, "mb-per-sec", o.mbPerSec)
}

func (o *costOptions) workload() costmodel.Workload {
	return costmodel.Workload{
		BytesPerSecond:     o.mbPerSec * 1e6,
		Partitions:         o.partitions,
		BatchBytes:         float64(o.batchBytes),
		Brokers:            o.brokers,
		Leaders:            o.leaders,
		RF:                 o.rf,
		FollowersPerObject: o.followersPerObject,
		RangesPerFollower:  o.rangesPerFollower,
		FlushInterval:      o.interval,
		MaxObjectBytes:     int64(o.objectBytes),
		Retention:          o.retention,
		MetadataPartitions: o.metadataPartitions,
		WaitFraction:       o.waitFraction,
		WaitCutDelay:       o.waitCutDelay,
	}
}

// prices is the preset with the price flags given on the command line.
func (o *costOptions) prices(fs *flag.FlagSet) (costmodel.Prices, error) {
	p, err := presetPrices(o.preset)
	if err != nil {
		return p, flagError(fs, "preset", err.Error())
	}
	v := o.override
	for _, f := range []struct {
		name string
		src  float64
		dst  []*float64
	}{
		{"put-per-1000", v.putPer1000, []*float64{&p.PutPer1000}},
		{"get-per-1000", v.getPer1000, []*float64{&p.GetPer1000}},
		{"upload-per-gb", v.uploadPerGB, []*float64{&p.UploadPerGB}},
		{"retrieval-per-gb", v.retrievalPerGB, []*float64{&p.RetrievalPerGB}},
		{"storage-per-gb-month", v.storagePerGBMonth, []*float64{&p.StoragePerGBMonth}},
		{"cross-az-per-gb", v.crossAZPerGB, []*float64{&p.CrossAZOutPerGB, &p.CrossAZInPerGB}},
		{"cross-az-out-per-gb", v.crossAZOutPerGB, []*float64{&p.CrossAZOutPerGB}},
		{"cross-az-in-per-gb", v.crossAZInPerGB, []*float64{&p.CrossAZInPerGB}},
	} {
		if !isSet(fs, f.name) {
			continue
		}
		if math.IsNaN(f.src) || f.src < 0 || f.src > maxPrice {
			return p, flagError(fs, f.name, "must be a finite price between 0 and "+strconv.FormatFloat(maxPrice, 'f', -1, 64))
		}
		for _, d := range f.dst {
			*d = f.src
		}
		p.Name = strings.TrimSuffix(p.Name, " (overridden)") + " (overridden)"
	}
	if o.gib {
		p.BytesPerGB = costmodel.BinaryGB
	}
	if err := p.Validate(); err != nil {
		return p, usagef("%v", err)
	}
	return p, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// modelError turns the cost model's first invalid field into a usage error
// naming its flag. An error about the workload as a whole (values that are
// each valid but together beyond what the model can express) names the
// flags among suspects that were given. Anything else is a failure of the
// model itself.
func modelError(fs *flag.FlagSet, err error, suspects ...string) error {
	var fe *costmodel.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	if name, ok := costFlagOf(fe.Field); ok {
		return flagError(fs, name, fe.Problem)
	}
	var given []string
	for _, name := range suspects {
		if isSet(fs, name) {
			given = append(given, "--"+name+" "+fs.Lookup(name).Value.String())
		}
	}
	if len(given) == 0 {
		given = []string{"the defaults"}
	}
	return usagef("%s: %s", strings.Join(given, ", "), fe.Problem)
}

// numericFlags names the flags of fs whose values are numbers.
func numericFlags(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Value.(type) {
		case *byteSize:
			names = append(names, f.Name)
		case flag.Getter:
			switch f.Value.(flag.Getter).Get().(type) {
			case int, int64, uint, uint64, float64, time.Duration:
				names = append(names, f.Name)
			}
		}
	})
	return names
}

// costReport is the output of `activetier cost`, as JSON and as the source
// of the table.
type costReport struct {
	Prices   pricesJSON   `json:"prices"`
	Workload workloadJSON `json:"workload"`
	Rates    ratesJSON    `json:"rates"`
	// Period is what Cost is given for.
	Period string         `json:"period"`
	Cost   comparisonJSON `json:"cost"`
	// BreakEvenMBPerSec is the throughput above which activetier pays for
	// this placement and cut interval; nil when there is none, with
	// BreakEvenNote saying why.
	BreakEvenMBPerSec *float64  `json:"break_even_mb_per_sec"`
	BreakEvenNote     string    `json:"break_even_note,omitempty"`
	Plan              *planJSON `json:"plan,omitempty"`
	// Comparison says what the two paths are compared on.
	Comparison string `json:"comparison"`

	est costmodel.Estimate
}

type pricesJSON struct {
	Name              string  `json:"name"`
	PutPer1000        float64 `json:"put_per_1000"`
	GetPer1000        float64 `json:"get_per_1000"`
	UploadPerGB       float64 `json:"upload_per_gb"`
	RetrievalPerGB    float64 `json:"retrieval_per_gb"`
	StoragePerGBMonth float64 `json:"storage_per_gb_month"`
	CrossAZOutPerGB   float64 `json:"cross_az_out_per_gb"`
	CrossAZInPerGB    float64 `json:"cross_az_in_per_gb"`
	BytesPerGB        float64 `json:"bytes_per_gb"`
	// Note says what the price list leaves out, if anything.
	Note string `json:"note,omitempty"`
}

type workloadJSON struct {
	MBPerSec           float64 `json:"mb_per_sec"`
	Partitions         int     `json:"partitions"`
	RF                 int     `json:"rf"`
	Brokers            int     `json:"brokers"`
	Leaders            int     `json:"leaders"`
	FlushIntervalMS    float64 `json:"flush_interval_ms"`
	MaxObjectBytes     int64   `json:"max_object_bytes"`
	BatchBytes         float64 `json:"batch_bytes"`
	RetentionSeconds   float64 `json:"retention_s"`
	MetadataPartitions int     `json:"metadata_partitions"`
	WaitFraction       float64 `json:"wait_fraction"`
	WaitCutDelayMS     float64 `json:"wait_cut_delay_ms"`
}

type ratesJSON struct {
	CutIntervalMS                 float64 `json:"cut_interval_ms"`
	PutsPerSecond                 float64 `json:"puts_per_second"`
	PutsPerSecondWithoutWaits     float64 `json:"puts_per_second_without_waits"`
	GetsPerSecond                 float64 `json:"gets_per_second"`
	ObjectBytes                   float64 `json:"object_bytes"`
	GetBytes                      float64 `json:"get_bytes"`
	SectionsPerObject             float64 `json:"sections_per_object"`
	FollowersPerObject            float64 `json:"followers_per_object"`
	RangesPerFollower             float64 `json:"ranges_per_follower"`
	UploadBytesPerSecond          float64 `json:"upload_bytes_per_second"`
	RetrievalBytesPerSecond       float64 `json:"retrieval_bytes_per_second"`
	ReplicationBytesPerSecond     float64 `json:"replication_bytes_per_second"`
	MetadataEntriesPerSecond      float64 `json:"metadata_entries_per_second"`
	MetadataBytesPerSecond        float64 `json:"metadata_bytes_per_second"`
	MetadataCrossAZBytesPerSecond float64 `json:"metadata_cross_az_bytes_per_second"`
	ControlBytesPerSecond         float64 `json:"control_bytes_per_second"`
}

type breakdownJSON struct {
	PutUSD         float64 `json:"put_usd"`
	GetUSD         float64 `json:"get_usd"`
	UploadUSD      float64 `json:"upload_usd"`
	RetrievalUSD   float64 `json:"retrieval_usd"`
	StorageUSD     float64 `json:"storage_usd"`
	MetadataUSD    float64 `json:"metadata_usd"`
	ControlUSD     float64 `json:"control_usd"`
	ReplicationUSD float64 `json:"replication_usd"`
	TotalUSD       float64 `json:"total_usd"`
}

type comparisonJSON struct {
	ActiveTier     breakdownJSON `json:"activetier"`
	BrokerToBroker breakdownJSON `json:"broker_to_broker"`
	SavingsUSD     float64       `json:"savings_usd"`
	SavingsRatio   float64       `json:"savings_ratio"`
}

type planJSON struct {
	// The durations as the planner gave them, for the table: the
	// milliseconds below do not convert back exactly.
	interval, budget, breakEven time.Duration

	FlushIntervalMS          float64 `json:"flush_interval_ms"`
	MaxObjectBytes           int64   `json:"max_object_bytes"`
	LatencyBudgetMS          float64 `json:"latency_budget_ms"`
	LagP50MS                 float64 `json:"lag_p50_ms"`
	LagP99MS                 float64 `json:"lag_p99_ms"`
	MeetsBudget              bool    `json:"meets_budget"`
	Pays                     bool    `json:"pays"`
	BreakEvenFlushIntervalMS float64 `json:"break_even_flush_interval_ms"`
	Reason                   string  `json:"reason"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func newBreakdownJSON(b costmodel.Breakdown) breakdownJSON {
	return breakdownJSON{
		PutUSD: b.PutUSD, GetUSD: b.GetUSD, UploadUSD: b.UploadUSD, RetrievalUSD: b.RetrievalUSD,
		StorageUSD: b.StorageUSD, MetadataUSD: b.MetadataUSD, ControlUSD: b.ControlUSD,
		ReplicationUSD: b.ReplicationUSD, TotalUSD: b.TotalUSD,
	}
}

func newComparisonJSON(c costmodel.Comparison) comparisonJSON {
	return comparisonJSON{
		ActiveTier:     newBreakdownJSON(c.ActiveTier),
		BrokerToBroker: newBreakdownJSON(c.BrokerToBroker),
		SavingsUSD:     c.SavingsUSD,
		SavingsRatio:   c.SavingsRatio,
	}
}

func newPlanJSON(p costmodel.Plan, budget time.Duration) *planJSON {
	return &planJSON{
		interval: p.FlushInterval, budget: budget, breakEven: p.BreakEvenFlushInterval,
		FlushIntervalMS: ms(p.FlushInterval), MaxObjectBytes: p.MaxObjectBytes, LatencyBudgetMS: ms(budget),
		LagP50MS: ms(p.Lag.P50), LagP99MS: ms(p.Lag.P99), MeetsBudget: p.MeetsBudget, Pays: p.Pays,
		BreakEvenFlushIntervalMS: ms(p.BreakEvenFlushInterval), Reason: p.Reason,
	}
}

func (r *costReport) fill(p costmodel.Prices, e costmodel.Estimate, scale float64) {
	r.est = e
	r.Prices = pricesJSON{
		Name: p.Name, PutPer1000: p.PutPer1000, GetPer1000: p.GetPer1000, UploadPerGB: p.UploadPerGB,
		RetrievalPerGB: p.RetrievalPerGB, StoragePerGBMonth: p.StoragePerGBMonth,
		CrossAZOutPerGB: p.CrossAZOutPerGB, CrossAZInPerGB: p.CrossAZInPerGB, BytesPerGB: p.BytesPerGB,
		Note: p.Note,
	}
	w := e.Workload
	r.Workload = workloadJSON{
		MBPerSec: w.BytesPerSecond / 1e6, Partitions: w.Partitions, RF: w.RF, Brokers: w.Brokers,
		Leaders: w.Leaders, FlushIntervalMS: ms(w.FlushInterval), MaxObjectBytes: w.MaxObjectBytes,
		BatchBytes: w.BatchBytes, RetentionSeconds: w.Retention.Seconds(), MetadataPartitions: w.MetadataPartitions,
		WaitFraction: w.WaitFraction, WaitCutDelayMS: ms(w.WaitCutDelay),
	}
	r.Rates = ratesJSON{
		CutIntervalMS: ms(e.CutInterval), PutsPerSecond: e.PutsPerSecond, PutsPerSecondWithoutWaits: e.PutsPerSecondWithoutWaits,
		GetsPerSecond: e.GetsPerSecond, ObjectBytes: e.ObjectBytes, GetBytes: e.GetBytes, SectionsPerObject: e.SectionsPerObject,
		FollowersPerObject: e.FollowersPerObject, RangesPerFollower: e.RangesPerFollower,
		UploadBytesPerSecond: e.UploadBytesPerSecond, RetrievalBytesPerSecond: e.RetrievalBytesPerSecond,
		ReplicationBytesPerSecond: e.ReplicationBytesPerSecond, MetadataEntriesPerSecond: e.MetadataEntriesPerSecond,
		MetadataBytesPerSecond: e.MetadataBytesPerSecond, MetadataCrossAZBytesPerSecond: e.MetadataCrossAZBytesPerSecond,
		ControlBytesPerSecond: e.ControlBytesPerSecond,
	}
	r.Cost = newComparisonJSON(e.PerSecond.Scale(scale))
	r.Comparison = costComparison(w.BytesPerSecond)
}

// costComparison says, in the report's words, what the cost command
// compares: the model has one byte count for both paths, so neither gains
// from a compression the other lacks (unlike the demo, whose generated
// batches are uncompressed while its sections are not).
func costComparison(bytesPerSecond float64) string {
	return fmt.Sprintf("like for like: objects and broker-to-broker replication priced on the same %s/s, "+
		"the batches as producers sent them (compressed or not)", humanBytes(bytesPerSecond))
}

// breakEven fills the throughput at which the estimated workload's
// placement and cut settings start to pay. A plan's object size cap is left
// out: it is the expected size at the planned rate, and would make every
// other rate look like it cuts by size.
func (r *costReport) breakEven(p costmodel.Prices, plan bool) {
	w := r.est.Workload
	if plan {
		w.MaxObjectBytes = 0
	}
	bps, err := costmodel.BreakEvenThroughput(p, w)
	if err != nil {
		r.BreakEvenNote = strings.TrimPrefix(err.Error(), "costmodel: ")
		return
	}
	mb := bps / 1e6
	r.BreakEvenMBPerSec = &mb
}

func (r *costReport) writeText(w io.Writer) error {
	e, wl := r.est, r.est.Workload
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "workload\t%s/s over %d partitions on %d leaders, RF %d, %d brokers\n",
		humanBytes(wl.BytesPerSecond), wl.Partitions, wl.Leaders, wl.RF, wl.Brokers)
	fmt.Fprintf(tw, "prices\t%s\n", r.Prices.Name)
	if r.Prices.Note != "" {
		fmt.Fprintf(tw, "\t%s\n", r.Prices.Note)
	}
	if pl := r.Plan; pl != nil {
		verdict := "met"
		if !pl.MeetsBudget {
			verdict = "NOT met"
		}
		fmt.Fprintf(tw, "plan\tflush every %v, objects up to %s\n", pl.interval, humanBytes(float64(pl.MaxObjectBytes)))
		fmt.Fprintf(tw, "lag\tp50 %.1f ms, p99 %.1f ms; budget %v %s\n", pl.LagP50MS, pl.LagP99MS, pl.budget, verdict)
		pays := "yes"
		if !pl.Pays {
			pays = "NO"
		}
		fmt.Fprintf(tw, "pays\t%s\n", pays)
		if pl.breakEven > 0 {
			fmt.Fprintf(tw, "break-even interval\t%v\n", pl.breakEven)
		}
	}
	fmt.Fprintf(tw, "objects\t%s/s of %s, %.3g sections each, cut every %s\n",
		rateString(e.PutsPerSecond), humanBytes(e.ObjectBytes), e.SectionsPerObject, cutInterval(e.CutInterval))
	if wl.WaitFraction > 0 && wl.WaitCutDelay > 0 {
		fmt.Fprintf(tw, "waiters\t%.3g of appends wait, cut within %v: %s PUTs/s, %s without waiters (at most %s: 1/%v per leader)\n",
			wl.WaitFraction, wl.WaitCutDelay, rateString(e.PutsPerSecond), rateString(e.PutsPerSecondWithoutWaits),
			rateString(float64(wl.Leaders)/wl.WaitCutDelay.Seconds()), wl.WaitCutDelay)
		assume := fmt.Sprintf("Poisson appends of --batch-bytes, each waited for with probability %.3g", wl.WaitFraction)
		if wl.BatchBytes == 0 {
			assume = "a waiter in every bound, the most PUTs: without --batch-bytes the append rate is unknown"
		}
		fmt.Fprintf(tw, "\tassumes %s; a waited append is acknowledged after about one PUT\n", assume)
	}
	gets := "GETs"
	if e.RangesPerFollower == 1 {
		gets = "GET"
	}
	fmt.Fprintf(tw, "range GETs\t%s/s of %s (%.3g followers per object, %.3g %s each)\n",
		rateString(e.GetsPerSecond), humanBytes(e.GetBytes), e.FollowersPerObject, e.RangesPerFollower, gets)
	fmt.Fprintf(tw, "metadata\t%s/s published, %s/s crossing AZs\n",
		humanBytes(e.MetadataBytesPerSecond), humanBytes(e.MetadataCrossAZBytesPerSecond))
	fmt.Fprintf(tw, "broker-to-broker\t%s/s would cross AZs\n", humanBytes(e.ReplicationBytesPerSecond))
	fmt.Fprintf(tw, "comparison\t%s\n", r.Comparison)
	if r.BreakEvenMBPerSec != nil {
		fmt.Fprintf(tw, "break-even\tactivetier pays above %s/s at these settings\n", humanBytes(*r.BreakEvenMBPerSec*1e6))
	} else {
		fmt.Fprintf(tw, "break-even\t%s\n", r.BreakEvenNote)
	}
	fmt.Fprintln(tw)

	at, b2b := r.Cost.ActiveTier, r.Cost.BrokerToBroker
	fmt.Fprintf(tw, "per %s\tactivetier\tbroker-to-broker\n", r.Period)
	for _, l := range []struct {
		name   string
		at, bb float64
		onlyAT bool
		onlyBB bool
	}{
		{name: "PUT requests", at: at.PutUSD, onlyAT: true},
		{name: "GET requests", at: at.GetUSD, onlyAT: true},
		{name: "upload", at: at.UploadUSD, onlyAT: true},
		{name: "retrieval", at: at.RetrievalUSD, onlyAT: true},
		{name: "storage", at: at.StorageUSD, onlyAT: true},
		{name: "metadata (cross-AZ)", at: at.MetadataUSD, onlyAT: true},
		{name: "control (cross-AZ)", at: at.ControlUSD, bb: b2b.ControlUSD},
		{name: "replication (cross-AZ)", bb: b2b.ReplicationUSD, onlyBB: true},
		{name: "total", at: at.TotalUSD, bb: b2b.TotalUSD},
	} {
		a, b := usd(l.at), usd(l.bb)
		if l.onlyBB {
			a = "-"
		}
		if l.onlyAT {
			b = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", l.name, a, b)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Cost.SavingsUSD >= 0 {
		fmt.Fprintf(w, "\nactivetier saves %s per %s (%.1f%%)\n", usd(r.Cost.SavingsUSD), r.Period, 100*r.Cost.SavingsRatio)
	} else {
		times := "" // broker-to-broker can cost nothing, with free cross-AZ transfer
		if bb := r.Cost.BrokerToBroker.TotalUSD; bb > 0 {
			times = fmt.Sprintf(" (%.3g× broker-to-broker)", r.Cost.ActiveTier.TotalUSD/bb)
		}
		fmt.Fprintf(w, "\nactivetier does NOT pay: it costs %s more per %s%s\n", usd(-r.Cost.SavingsUSD), r.Period, times)
	}
	if r.Plan != nil {
		_, err := fmt.Fprintf(w, "\nwhy: %s\n", r.Plan.Reason)
		return err
	}
	return nil
}

// cutInterval writes the model's cut interval to the microsecond, and
// shorter ones as they are; objects cut faster than a nanosecond (a tiny
// --object-bytes at a huge rate) have an interval the Duration rounds to 0.
func cutInterval(d time.Duration) string {
	switch {
	case d >= time.Microsecond:
		return d.Round(time.Microsecond).String()
	case d > 0:
		return d.String()
	}
	return "under 1ns"
}

// rateString formats a per-second count with three significant digits.
func rateString(x float64) string {
	if x >= 1000 && x < maxThousands {
		return thousands(int64(math.Round(x)))
	}
	return fmt.Sprintf("%.3g", x)
}
