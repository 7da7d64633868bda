package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/activetier/activetier/walstore"
)

// progress shows the demo as it runs. On a terminal it redraws one status
// line four times a second; elsewhere (a pipe, a CI log) it writes a plain
// line every second. Events (an AZ going down) are lines of their own.
type progress struct {
	w        io.Writer
	terminal bool

	mu      sync.Mutex // serialises writes to w
	drawn   bool       // a status line is on screen, without its newline
	stopCh  chan struct{}
	stopped chan struct{}
	sample  func() progressSample
	began   time.Time
}

// progressSample is the cluster's counters at one instant.
type progressSample struct {
	at           time.Time
	produced     int64
	replicated   uint64
	lag          walstore.Histogram
	inflight     int
	objects      uint64
	puts, gets   int64
	behindOffset int64
}

func newProgress(w io.Writer, terminal bool) *progress {
	return &progress{w: w, terminal: terminal}
}

// header describes the run; where is the object store ("s3express
// latency", or the buckets on an S3 endpoint).
func (p *progress) header(o *demoOptions, cfg simConfig, where string) {
	p.line(fmt.Sprintf("activetier demo: %d brokers in %d AZs, %s, %d partitions at RF %d, %s/s for %v; %s, %s sections, flush every %v",
		cfg.brokers, len(cfg.azs), plural(cfg.topics, "topic"), cfg.partitions, cfg.rf, humanBytes(o.rate*1e6), o.duration, where, cfg.codec, cfg.interval))
}

// start begins sampling the cluster; stop ends it and finishes the line.
func (p *progress) start(s *sim, pr *producer, start time.Time) {
	p.began = start
	if p.w == io.Discard {
		// Nobody reads it; sampling costs the engines CPU at scale (its
		// count of offsets behind visits every replica).
		return
	}
	p.sample = func() progressSample { return sampleSim(s, pr) }
	p.stopCh, p.stopped = make(chan struct{}), make(chan struct{})
	every := time.Second
	if p.terminal {
		every = 250 * time.Millisecond
	}
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		prev := p.sample()
		prev.at = start
		for {
			select {
			case <-p.stopCh:
				return
			case <-t.C:
				cur := p.sample()
				p.status(prev, cur)
				if !p.terminal || cur.at.Sub(prev.at) >= time.Second {
					prev = cur // rates over about a second, redrawn more often
				}
			}
		}
	}()
}

func (p *progress) stop() {
	if p.stopCh == nil {
		return
	}
	close(p.stopCh)
	<-p.stopped
	p.stopCh = nil
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// event writes msg on a line of its own, stamped with the run's time.
func (p *progress) event(msg string) {
	p.line(fmt.Sprintf("%6.1fs  %s", time.Since(p.began).Seconds(), msg))
}

func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
	fmt.Fprintln(p.w, s)
}

func (p *progress) status(prev, cur progressSample) {
	dt := cur.at.Sub(prev.at).Seconds()
	lag := cur.lag.Since(&prev.lag)
	s := fmt.Sprintf("%6.1fs  %s produced (%s/s), %s replicated, lag p50 %v p99 %v, %s offsets behind, uploading %d, %d objects, %d PUTs, %d GETs",
		cur.at.Sub(p.began).Seconds(), humanBytes(float64(cur.produced)), humanBytes(float64(cur.produced-prev.produced)/dt),
		humanBytes(float64(cur.replicated)), lag.Quantile(0.5).Round(time.Millisecond), lag.Quantile(0.99).Round(time.Millisecond),
		thousands(cur.behindOffset), cur.inflight, cur.objects, cur.puts, cur.gets)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		// One screen line, or the carriage return would redraw only the
		// last of its wrapped lines.
		if f, ok := p.w.(*os.File); ok {
			if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 1 && len(s) >= width {
				s = s[:width-1]
			}
		}
		fmt.Fprint(p.w, "\r\x1b[K"+s)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, s)
}

func sampleSim(s *sim, pr *producer) progressSample {
	ps := progressSample{at: time.Now(), produced: pr.bytes.Load()}
	for _, st := range s.nodeStats() {
		ls := st.Leader
		ps.inflight += ls.UploadsInFlight
		ps.objects += ls.Objects
		fs := st.Follower
		ps.replicated += fs.AppliedBytes
		ps.lag.Merge(&fs.ApplyLag)
	}
	_, ps.behindOffset, _ = s.c.Behind() // a failure here shows in the run's own checks
	st := s.objects.requests()
	ps.puts, ps.gets = st.puts, st.gets
	return ps
}
