package sim

import (
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/storage"
)

// chaos is the simulated network between brokers and buckets: it decides
// each request's latency, whether a fault hits it, and which byte a
// corrupting fault changes. Every draw comes from a hash of the seed and
// the request's identity (what it carries, not when it arrives), and the
// n-th identical request gets the n-th draw. Two requests racing at the
// same simulated instant therefore get the same draws whichever goes first,
// which keeps one scheduling accident from reshuffling every later latency
// as a shared sequential source would. It reaches the stores as each
// broker's faults.Injector (simStore.Inject), which names the request; its
// effect's delay is the request's whole latency, which the simulation
// schedules rather than waits. memstore keeps the buckets, the outages and
// the accounting; its own latency model and its faults, which draw from
// one source in arrival order, are not used.
type chaos struct {
	seed    uint64
	profile memstore.Profile

	mu     sync.Mutex
	faults []*fault
	seen   map[uint64]uint64
}

// fault is one injected store fault: what a faults.Rate over a
// faults.On would be, drawn from the request's own draws.
type fault struct {
	op         faults.Op
	bucket     string // "" for every bucket
	rate       float64
	err        bool
	afterApply bool
	delay      time.Duration
	corrupt    bool
}

func newChaos(seed uint64, profile memstore.Profile) *chaos {
	return &chaos{seed: seed, profile: profile, seen: make(map[uint64]uint64)}
}

func (c *chaos) add(f *fault) func() {
	c.mu.Lock()
	c.faults = append(c.faults, f)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, g := range c.faults {
			if g == f {
				c.faults = append(c.faults[:i], c.faults[i+1:]...)
				return
			}
		}
	}
}

func (c *chaos) clear() {
	c.mu.Lock()
	c.faults = nil
	c.mu.Unlock()
}

// identity hashes what names a request.
func identity(parts ...uint64) uint64 {
	var buf [8]byte
	d := xxhash.New()
	for _, p := range parts {
		binary.LittleEndian.PutUint64(buf[:], p)
		d.Write(buf[:])
	}
	return d.Sum64()
}

func hashString(s string) uint64 { return xxhash.Sum64String(s) }

// draws is a small deterministic source for one request.
type draws struct{ state uint64 }

// next is splitmix64.
func (d *draws) next() uint64 {
	d.state += 0x9e3779b97f4a7c15
	z := d.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (d *draws) float() float64 { return float64(d.next()>>11) / (1 << 53) }

// normal is a standard normal draw (Box-Muller).
func (d *draws) normal() float64 {
	u1, u2 := d.float(), d.float()
	if u1 == 0 {
		u1 = 1.0 / (1 << 53)
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// The kinds of request as identity names them: the values the draws were
// first keyed with, kept so that a seed keeps its run.
const (
	idPut uint64 = iota + 1
	idGet
	idDelete
)

// decide returns the fate of a request of kind op to bucket, from or to a
// store in another AZ if cross, moving size bytes, named by id: its
// latency as the delay, storage.ErrUnavailable for a fault's error.
func (c *chaos) decide(op faults.Op, bucket string, cross bool, size int64, id uint64) faults.Effect {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.seen[id]
	c.seen[id] = n + 1
	d := draws{state: identity(c.seed, id, n)}
	var v faults.Effect
	l := latencyOf(c.profile, op)
	median := float64(l.Median) + float64(l.PerMiB)*float64(size)/(1<<20)
	z := d.normal()
	if median > 0 {
		v.Delay = time.Duration(median * math.Exp(l.Sigma*z))
	}
	x := d.float()
	if cross && c.profile.CrossAZMax > 0 {
		v.Delay += c.profile.CrossAZMin + time.Duration(x*float64(c.profile.CrossAZMax-c.profile.CrossAZMin))
	}
	for _, f := range c.faults {
		u := d.float() // drawn for every fault, matching or not
		if f.op != op || f.bucket != "" && f.bucket != bucket || u >= f.rate {
			continue
		}
		v.Delay += f.delay
		if f.corrupt {
			v.Corrupt = d.next() | 1
		}
		if f.err && v.Err == nil {
			v.Err, v.AfterApply = storage.ErrUnavailable, f.afterApply
		}
	}
	return v
}

func latencyOf(p memstore.Profile, op faults.Op) memstore.Latency {
	switch op {
	case faults.OpGetRange, faults.OpReadRange:
		return p.Get
	case faults.OpPut:
		return p.Put
	case faults.OpDelete:
		return p.Delete
	}
	return p.List
}
