package main

import (
	"sync"
	"time"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metering"
)

// timelineSample is the run over one sampling interval, for the HTML
// report's charts: rates over the interval, lag quantiles of the samples
// taken in it, costs since the start.
type timelineSample struct {
	AtS            float64
	ProducedMBps   float64
	ReplicatedMBps float64
	LagP50MS       float64
	LagP99MS       float64
	PutsPerS       float64
	GetsPerS       float64
	CostUSD        float64
	CrossAZUSD     float64
}

// timelineMark is a moment worth a line on the charts: an AZ going down,
// new leaders.
type timelineMark struct {
	AtS   float64
	Label string
}

// timeline samples a running sim until stopped.
type timeline struct {
	start   time.Time
	stopCh  chan struct{}
	stopped chan struct{}
	once    sync.Once

	mu    sync.Mutex
	out   []timelineSample
	marks []timelineMark
}

// timelineSamples is how many samples a run is cut into, at most.
const timelineSamples = 120

func startTimeline(s *sim, p *producer, m *metering.Meter, start time.Time, runFor time.Duration) *timeline {
	every := min(max(runFor/timelineSamples, 100*time.Millisecond), time.Second)
	tl := &timeline{start: start, stopCh: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(tl.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		prev := sampleSim(s, p)
		prev.at = start
		for {
			select {
			case <-tl.stopCh:
				return
			case <-t.C:
			}
			cur := sampleSim(s, p)
			dt := cur.at.Sub(prev.at).Seconds()
			lag := cur.lag.Since(&prev.lag)
			ts := timelineSample{
				AtS:            cur.at.Sub(start).Seconds(),
				ProducedMBps:   float64(cur.produced-prev.produced) / 1e6 / dt,
				ReplicatedMBps: float64(cur.replicated-prev.replicated) / 1e6 / dt,
				LagP50MS:       ms(lag.Quantile(0.5)),
				LagP99MS:       ms(lag.Quantile(0.99)),
				PutsPerS:       float64(cur.puts-prev.puts) / dt,
				GetsPerS:       float64(cur.gets-prev.gets) / dt,
			}
			// The prices are the report's own, already validated; a
			// usage of counters cannot be negative.
			if c, err := costmodel.RunCost(m.Prices(), usageOf(s, p, m)); err == nil {
				ts.CostUSD, ts.CrossAZUSD = c.ActiveTier.TotalUSD, c.BrokerToBroker.TotalUSD
			}
			tl.mu.Lock()
			tl.out = append(tl.out, ts)
			tl.mu.Unlock()
			prev = cur
		}
	}()
	return tl
}

// mark records a moment; safe from any goroutine.
func (tl *timeline) mark(at time.Time, label string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.marks = append(tl.marks, timelineMark{AtS: at.Sub(tl.start).Seconds(), Label: label})
}

// stop ends the sampling; later calls do nothing.
func (tl *timeline) stop() {
	tl.once.Do(func() {
		close(tl.stopCh)
		<-tl.stopped
	})
}

// result returns the samples and marks taken.
func (tl *timeline) result() ([]timelineSample, []timelineMark) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]timelineSample(nil), tl.out...), append([]timelineMark(nil), tl.marks...)
}
