package costmodel

import (
	"testing"
	"time"
)

func benchWorkload() Workload {
	return Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 100 * time.Millisecond}
}

// BenchmarkWorkloadCost is the baseline: one steady-state estimate.
func BenchmarkWorkloadCost(b *testing.B) {
	b.ReportAllocs()
	p := S3Express2025()
	for b.Loop() {
		if _, err := WorkloadCost(p, benchWorkload()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWorkloadLag is one p50 and p99 by quadrature and bisection.
func BenchmarkWorkloadLag(b *testing.B) {
	b.ReportAllocs()
	l := S3ExpressLatency()
	for b.Loop() {
		if _, err := WorkloadLag(benchWorkload(), l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanWorkload is a whole plan: two interval searches.
func BenchmarkPlanWorkload(b *testing.B) {
	b.ReportAllocs()
	p := S3Express2025()
	w := benchWorkload()
	w.FlushInterval = 0
	for b.Loop() {
		if _, err := PlanWorkload(p, PlanRequest{Workload: w, P99Lag: 150 * time.Millisecond}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBreakEvenThroughput is one log-space bisection over throughput.
func BenchmarkBreakEvenThroughput(b *testing.B) {
	b.ReportAllocs()
	p := S3Express2025()
	for b.Loop() {
		if _, err := BreakEvenThroughput(p, benchWorkload()); err != nil {
			b.Fatal(err)
		}
	}
}
