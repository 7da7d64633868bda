package costmodel

import (
	"math"
	"time"
)

// mib is the unit the latency slopes are quoted in.
const mib = 1 << 20

// Latency is the replication-lag model of an object store: lognormal PUT and
// GET latencies whose median grows linearly with the bytes moved, plus a fixed
// delay for the metadata entry to travel from leader to follower. Start from
// S3ExpressLatency or S3StandardLatency and override fields.
type Latency struct {
	// PutBase is the median latency of a PUT of an empty object;
	// PutPerMiB is added per MiB uploaded.
	PutBase   time.Duration
	PutPerMiB time.Duration
	// PutSigma is the σ of ln(PUT latency) around that median.
	PutSigma float64
	// GetBase, GetPerMiB and GetSigma are the same for a range GET.
	GetBase   time.Duration
	GetPerMiB time.Duration
	GetSigma  float64
	// MetadataDelay is the time from the PUT completing to the follower
	// reading the entry: a produce and a consume on the metadata log.
	MetadataDelay time.Duration
}

// S3ExpressLatency returns the S3 Express One Zone fit of docs/design.md,
// "Reference prices and latencies": PUT 6.5 ms + 10 ms/MiB, σ 0.24; GET
// 2.5 ms, σ 0.57 (p99 ≈ 9.3 ms for 4 KiB). The measurements give no size
// slope for Express GETs; this uses the PUT's 10 ms/MiB
// (~100 MiB/s per stream, close to S3 Standard's ~90 MB/s), which is
// conservative. MetadataDelay is 5 ms, Kafka's acks=all p99 at 200 MB/s.
func S3ExpressLatency() Latency {
	return Latency{
		PutBase:       6500 * time.Microsecond,
		PutPerMiB:     10 * time.Millisecond,
		PutSigma:      0.24,
		GetBase:       2500 * time.Microsecond,
		GetPerMiB:     10 * time.Millisecond,
		GetSigma:      0.57,
		MetadataDelay: 5 * time.Millisecond,
	}
}

// S3StandardLatency returns the S3 Standard fit of docs/design.md,
// "Reference prices and latencies": PUT 60 ms +
// 20 ms/MiB, σ 0.29; GET 27 ms + size at ~90 MB/s per stream, σ 0.62.
func S3StandardLatency() Latency {
	return Latency{
		PutBase:       60 * time.Millisecond,
		PutPerMiB:     20 * time.Millisecond,
		PutSigma:      0.29,
		GetBase:       27 * time.Millisecond,
		GetPerMiB:     11650844 * time.Nanosecond, // 1 MiB at 90 MB/s
		GetSigma:      0.62,
		MetadataDelay: 5 * time.Millisecond,
	}
}

// maxSigma bounds the lognormal σ: beyond it the tail is so heavy that the
// p99 is more than ~10^4 times the median, which no object store fit needs.
const maxSigma = 4

// Validate reports every field the model cannot use, naming each.
func (l Latency) Validate() error {
	var c checker
	if l.PutBase <= 0 {
		c.fail("Latency.PutBase", l.PutBase, "must be positive")
	}
	if l.GetBase <= 0 {
		c.fail("Latency.GetBase", l.GetBase, "must be positive")
	}
	c.nonNegativeDuration("Latency.PutPerMiB", l.PutPerMiB)
	c.nonNegativeDuration("Latency.GetPerMiB", l.GetPerMiB)
	c.nonNegativeDuration("Latency.MetadataDelay", l.MetadataDelay)
	for _, s := range []struct {
		name string
		v    float64
	}{{"Latency.PutSigma", l.PutSigma}, {"Latency.GetSigma", l.GetSigma}} {
		if c.finite(s.name, s.v) && (s.v < 0 || s.v > maxSigma) {
			c.fail(s.name, s.v, "must be between 0 and 4")
		}
	}
	return c.err()
}

// Lag is the replication lag of a record: from the leader appending it to a
// follower holding it. A record waits for its object to be cut (uniformly
// between 0 and the cut interval), for the PUT, for the metadata entry, and
// for the follower's GET:
//
//	lag = U(0, CutInterval) + PUT(object bytes) + MetadataDelay + GET(range bytes)
//
// P50 and P99 are quantiles of that sum (PUT and GET independent lognormals),
// not sums of quantiles.
type Lag struct {
	CutInterval   time.Duration
	PutMedian     time.Duration
	GetMedian     time.Duration
	MetadataDelay time.Duration
	P50           time.Duration
	P99           time.Duration
}

// WorkloadLag estimates the replication lag of w's objects under l.
func WorkloadLag(w Workload, l Latency) (Lag, error) {
	if err := w.Validate(); err != nil {
		return Lag{}, err
	}
	if err := l.Validate(); err != nil {
		return Lag{}, err
	}
	return lagOf(shapeOf(w.withDefaults()), l)
}

// maxLagSeconds keeps lags representable as a time.Duration (~292 years).
const maxLagSeconds = 1e9

func lagOf(sh shape, l Latency) (Lag, error) {
	d := lagDist{
		wait:     sh.interval,
		fixed:    l.MetadataDelay.Seconds(),
		putMed:   l.PutBase.Seconds() + l.PutPerMiB.Seconds()*sh.objectBytes/mib,
		putSigma: l.PutSigma,
		getMed:   l.GetBase.Seconds() + l.GetPerMiB.Seconds()*sh.getBytes/mib,
		getSigma: l.GetSigma,
	}
	if d.wait+d.putMed+d.getMed > maxLagSeconds || math.IsNaN(d.putMed+d.getMed) {
		return Lag{}, &FieldError{Field: "Workload", Value: sh.objectBytes,
			Problem: "objects this large take longer to move than a lag can express"}
	}
	d.init()
	return Lag{
		CutInterval:   seconds(d.wait),
		PutMedian:     seconds(d.putMed),
		GetMedian:     seconds(d.getMed),
		MetadataDelay: l.MetadataDelay,
		P50:           seconds(d.quantile(0.5)),
		P99:           seconds(d.quantile(0.99)),
	}, nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// lagDist is the distribution of U(0, wait) + fixed + PUT + GET in seconds,
// PUT and GET lognormal with the given medians and σ.
//
// Its CDF has a closed form in everything but the PUT: for Y = U + GET,
//
//	P(Y ≤ z) = (G(z) - G(z-wait)) / wait,   G(z) = ∫₀ᶻ F_GET(u) du
//	G(z) = z·Φ(d) - e^{μ+σ²/2}·Φ(d-σ),      d = (ln z - μ)/σ,
//
// and the PUT, median·e^{σZ} with Z standard normal, is integrated over Z by
// the trapezoidal rule on [-7, 7] (exponentially accurate for a smooth
// integrand under a Gaussian weight), with a step that shrinks as σ grows so
// that neighbouring points stay within ~5% of each other. The result is
// deterministic and agrees with a Monte Carlo simulation to well under 1% at
// p50 and p99.
type lagDist struct {
	wait, fixed      float64
	putMed, putSigma float64
	getMed, getSigma float64
	getMu, getMean   float64
	putPoints        []float64
	putWeights       []float64
}

const (
	putZMax = 7    // P(|Z| > 7) ≈ 2.6e-12
	putStep = 0.05 // in Z, for σ ≤ 1; divided by σ above
)

func (d *lagDist) init() {
	d.getMu = math.Log(d.getMed)
	d.getMean = math.Exp(d.getMu + d.getSigma*d.getSigma/2)
	if d.putSigma == 0 {
		d.putPoints, d.putWeights = []float64{d.putMed}, []float64{1}
		return
	}
	h := putStep / math.Max(1, d.putSigma)
	n := int(math.Ceil(2*putZMax/h)) + 1
	d.putPoints, d.putWeights = make([]float64, n), make([]float64, n)
	var total float64
	for i := range n {
		z := -putZMax + float64(i)*h
		d.putPoints[i] = d.putMed * math.Exp(d.putSigma*z)
		d.putWeights[i] = math.Exp(-z * z / 2)
		total += d.putWeights[i]
	}
	for i := range d.putWeights {
		d.putWeights[i] /= total
	}
}

// cdf returns P(lag ≤ x).
func (d *lagDist) cdf(x float64) float64 {
	y := x - d.fixed
	var sum float64
	for i, a := range d.putPoints {
		z := y - a
		sum += d.putWeights[i] * (d.getIntegral(z) - d.getIntegral(z-d.wait)) / d.wait
	}
	return sum
}

// getIntegral is G(z) = ∫₀ᶻ F_GET(u) du.
func (d *lagDist) getIntegral(z float64) float64 {
	if z <= 0 {
		return 0
	}
	if d.getSigma == 0 {
		return math.Max(0, z-d.getMed)
	}
	dz := (math.Log(z) - d.getMu) / d.getSigma
	return z*normalCDF(dz) - d.getMean*normalCDF(dz-d.getSigma)
}

// quantile inverts cdf by bisection to 1 µs, finer than any lag is reported.
func (d *lagDist) quantile(q float64) float64 {
	lo := d.fixed
	hi := d.fixed + d.wait + d.putMed*math.Exp(6*d.putSigma) + d.getMed*math.Exp(6*d.getSigma)
	for range 64 {
		if d.cdf(hi) >= q {
			break
		}
		lo, hi = hi, 2*hi
	}
	for range 128 {
		if hi-lo <= 1e-6 {
			break
		}
		mid := (lo + hi) / 2
		if d.cdf(mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

func normalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }
