package costmodel

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Planner limits.
const (
	// MinFlushInterval is the shortest interval the planner considers.
	MinFlushInterval = time.Millisecond
	// DefaultMaxFlushInterval is the longest it considers unless the
	// workload's FlushInterval says otherwise.
	DefaultMaxFlushInterval = 10 * time.Second
	// MaxPutBytes is the largest object one S3 PUT accepts (5 GiB); the
	// planner never suggests more.
	MaxPutBytes = 5 << 30
)

// PlanRequest asks for a flush interval and object size that keep the p99
// replication lag within a budget at the lowest cost.
type PlanRequest struct {
	// Workload is the traffic and placement. Its cut settings are limits
	// here: FlushInterval is the longest interval to consider (zero means
	// DefaultMaxFlushInterval), MaxObjectBytes the largest object (zero
	// means MaxPutBytes).
	Workload Workload
	// P99Lag is the budget for the p99 replication lag.
	P99Lag time.Duration
	// Latency is the object store's latency model (zero value means
	// S3ExpressLatency).
	Latency Latency
}

// Plan is the planner's suggestion and what it costs.
type Plan struct {
	// FlushInterval and MaxObjectBytes are the suggested settings. The cap
	// equals the expected object size, so objects are normally cut by time;
	// when throughput rises above the planned rate they are cut by size
	// instead, which keeps the lag within budget at the price of more PUTs.
	FlushInterval  time.Duration
	MaxObjectBytes int64
	// Estimate is the steady-state cost at the suggestion.
	Estimate Estimate
	// Lag is the replication lag at the suggestion.
	Lag Lag
	// MeetsBudget is false when even MinFlushInterval exceeds the budget;
	// the plan then uses MinFlushInterval.
	MeetsBudget bool
	// Pays is true when activetier costs less than broker-to-broker
	// replication at the suggestion.
	Pays bool
	// BreakEvenFlushInterval is the shortest flush interval at which
	// activetier costs no more than broker-to-broker replication, rounded up
	// to a millisecond, or zero when none up to the interval limit does.
	BreakEvenFlushInterval time.Duration
	// Reason explains the plan in a sentence or two.
	Reason string
}

// PlanWorkload suggests the longest flush interval whose p99 lag fits the
// budget: cost falls as the interval grows (fewer PUTs, GETs and metadata
// entries per byte) and lag rises, so that interval is the cheapest plan
// within budget. It says so plainly when activetier does not pay there, and
// at which interval it would. An unmeetable budget is a result, not an
// error: the plan has MeetsBudget false.
func PlanWorkload(p Prices, r PlanRequest) (Plan, error) {
	var c checker
	if err := p.Validate(); err != nil {
		c.errs = append(c.errs, err)
	}
	r.Workload.check(&c, false)
	if r.Workload.FlushInterval < 0 {
		c.fail("Workload.FlushInterval", r.Workload.FlushInterval, "must not be negative (0 means the default limit)")
	} else if r.Workload.FlushInterval > 0 && r.Workload.FlushInterval < MinFlushInterval {
		c.fail("Workload.FlushInterval", r.Workload.FlushInterval, "limit must be at least MinFlushInterval (1ms)")
	}
	if r.Workload.MaxObjectBytes < 0 || r.Workload.MaxObjectBytes > MaxPutBytes {
		c.fail("Workload.MaxObjectBytes", r.Workload.MaxObjectBytes, "must be between 0 (no limit but S3's) and 5 GiB")
	}
	if r.P99Lag <= 0 {
		c.fail("PlanRequest.P99Lag", r.P99Lag, "must be positive")
	}
	if r.Latency == (Latency{}) {
		r.Latency = S3ExpressLatency()
	} else if err := r.Latency.Validate(); err != nil {
		c.errs = append(c.errs, err)
	}
	if err := c.err(); err != nil {
		return Plan{}, err
	}

	w := r.Workload.withDefaults()
	maxInterval := w.FlushInterval
	if maxInterval == 0 {
		maxInterval = DefaultMaxFlushInterval
	}
	if w.MaxObjectBytes == 0 {
		w.MaxObjectBytes = MaxPutBytes
	}
	at := func(t time.Duration) Workload { v := w; v.FlushInterval = t; return v }
	p99 := func(t time.Duration) (time.Duration, error) {
		l, err := lagOf(shapeOf(at(t)), r.Latency)
		return l.P99, err
	}
	savings := func(t time.Duration) (float64, error) {
		e, err := estimate(p, at(t))
		return e.PerSecond.SavingsUSD, err
	}

	// The longest interval within budget: p99 grows with the interval.
	var plan Plan
	fits := func(t time.Duration) (bool, error) {
		l, err := p99(t)
		return l <= r.P99Lag, err
	}
	longest, feasible, err := lastTrue(maxInterval, fits)
	if err != nil {
		return Plan{}, err
	}
	plan.MeetsBudget = feasible
	plan.FlushInterval = MinFlushInterval
	if feasible {
		plan.FlushInterval = longest
	}

	// Cap objects at their expected size at the chosen interval.
	sh := shapeOf(at(plan.FlushInterval))
	plan.MaxObjectBytes = min(w.MaxObjectBytes, int64(math.Ceil(sh.objectBytes/1024))*1024)
	final := at(plan.FlushInterval)
	final.MaxObjectBytes = plan.MaxObjectBytes
	if plan.Estimate, err = estimate(p, final); err != nil {
		return Plan{}, err
	}
	if plan.Lag, err = lagOf(shapeOf(final), r.Latency); err != nil {
		return Plan{}, err
	}
	plan.Pays = plan.Estimate.PerSecond.SavingsUSD > 0

	// The shortest interval that breaks even: savings grow with the interval.
	loses := func(t time.Duration) (bool, error) {
		s, err := savings(t)
		return s < 0, err
	}
	lastLoss, everLoses, err := lastTrue(maxInterval, loses)
	if err != nil {
		return Plan{}, err
	}
	switch {
	case !everLoses:
		plan.BreakEvenFlushInterval = MinFlushInterval
	case lastLoss < maxInterval:
		plan.BreakEvenFlushInterval = min(maxInterval, lastLoss+time.Millisecond)
	}

	plan.Reason, err = planReason(p, r, w, plan, maxInterval)
	return plan, err
}

// lastTrue returns the largest t among the whole milliseconds from
// MinFlushInterval up to hi, and hi itself, with f(t) true, assuming f is true
// up to some point and false after it; ok is false when f(MinFlushInterval)
// is already false.
func lastTrue(hi time.Duration, f func(time.Duration) (bool, error)) (t time.Duration, ok bool, err error) {
	if ok, err = f(MinFlushInterval); err != nil || !ok {
		return MinFlushInterval, false, err
	}
	if ok, err = f(hi); err != nil || ok {
		return hi, err == nil, err
	}
	// Invariant: f(lo ms) is true, f(hi ms) is false (hi ms ≥ hi).
	lo, up := int64(MinFlushInterval/time.Millisecond), int64((hi+time.Millisecond-1)/time.Millisecond)
	for up-lo > 1 {
		mid := lo + (up-lo)/2
		ok, err := f(time.Duration(mid) * time.Millisecond)
		if err != nil {
			return 0, false, err
		}
		if ok {
			lo = mid
		} else {
			up = mid
		}
	}
	return time.Duration(lo) * time.Millisecond, true, nil
}

func planReason(p Prices, r PlanRequest, w Workload, plan Plan, maxInterval time.Duration) (string, error) {
	e, month := plan.Estimate, plan.Estimate.PerMonth()
	var b strings.Builder
	if plan.MeetsBudget {
		fmt.Fprintf(&b, "flush every %v: p99 replication lag %v (p50 %v) within the %v budget",
			plan.FlushInterval, plan.Lag.P99.Round(time.Millisecond), plan.Lag.P50.Round(time.Millisecond), r.P99Lag)
		if plan.FlushInterval == maxInterval {
			b.WriteString(" at the longest interval considered")
		}
	} else {
		fmt.Fprintf(&b, "no flush interval meets the %v p99 budget: even at %v the p99 lag is %v "+
			"(PUT p50 %v, GET p50 %v, metadata %v); planned at %v",
			r.P99Lag, MinFlushInterval, plan.Lag.P99.Round(100*time.Microsecond),
			plan.Lag.PutMedian.Round(100*time.Microsecond), plan.Lag.GetMedian.Round(100*time.Microsecond),
			plan.Lag.MetadataDelay, MinFlushInterval)
	}
	fmt.Fprintf(&b, "; objects of %s from %d leaders (%s PUTs/s, %s GETs/s: %.3g followers read each object)",
		decimalBytes(e.ObjectBytes), w.Leaders, rate(e.PutsPerSecond), rate(e.GetsPerSecond), e.FollowersPerObject)
	at, b2b := month.ActiveTier.TotalUSD, month.BrokerToBroker.TotalUSD
	if plan.Pays {
		fmt.Fprintf(&b, "; activetier %s/month vs broker-to-broker %s/month saves %s/month (%.1f%%)",
			usd(at), usd(b2b), usd(month.SavingsUSD), 100*month.SavingsRatio)
		return b.String(), nil
	}
	name, line := largestLine(month.ActiveTier)
	fmt.Fprintf(&b, "; does not pay: activetier %s/month vs broker-to-broker %s/month (%s/month more), "+
		"its largest line being %s at %s/month", usd(at), usd(b2b), usd(-month.SavingsUSD), name, usd(line))
	switch {
	case plan.BreakEvenFlushInterval > 0:
		be := w
		be.FlushInterval = plan.BreakEvenFlushInterval
		l, err := lagOf(shapeOf(be), r.Latency)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "; it breaks even from a flush interval of %v (p99 lag %v)",
			plan.BreakEvenFlushInterval, l.P99.Round(time.Millisecond))
	case perByteMargin(p, w) <= 0:
		gb := p.BytesPerGB
		fmt.Fprintf(&b, "; no object size makes it pay: per-byte fees (upload, retrieval, storage: %s/GB) are not below the cross-AZ replication they replace (%s/GB)",
			usd(gb*(p.crossAZPerByte()*float64(w.RF-1)-perByteMargin(p, w))), usd(gb*p.crossAZPerByte()*float64(w.RF-1)))
	default:
		fmt.Fprintf(&b, "; no flush interval up to %v breaks even: requests and metadata for so many followers per object outweigh the cross-AZ bytes saved", maxInterval)
	}
	return b.String(), nil
}

// perByteMargin is what activetier saves per produced byte before requests
// and metadata: the cross-AZ copies avoided minus the upload, retrieval and
// storage fees. When it is not positive no object size or interval pays.
func perByteMargin(p Prices, w Workload) float64 {
	copies := float64(w.RF - 1)
	return copies*p.crossAZPerByte() - p.uploadPerByte() - copies*p.retrievalPerByte() -
		w.Retention.Seconds()*p.storagePerByteSec()
}

// largestLine names the biggest line of an activetier breakdown.
func largestLine(b Breakdown) (string, float64) {
	name, v := "PUT requests", b.PutUSD
	for _, l := range []struct {
		name string
		v    float64
	}{
		{"GET requests", b.GetUSD}, {"upload fees", b.UploadUSD}, {"retrieval fees", b.RetrievalUSD},
		{"storage", b.StorageUSD}, {"metadata traffic", b.MetadataUSD}, {"control traffic", b.ControlUSD},
	} {
		if l.v > v {
			name, v = l.name, l.v
		}
	}
	return name, v
}
