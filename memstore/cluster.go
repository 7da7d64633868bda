package memstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/storage"
)

// ClusterConfig configures a Cluster.
type ClusterConfig struct {
	// Buckets maps each AZ to the name of its bucket. Required; AZ and
	// bucket names must be non-empty and bucket names distinct.
	Buckets map[string]string
	// Profile is the latency model. The zero Profile is "none": no request
	// ever waits.
	Profile Profile
	// Seed seeds the source of every random choice the cluster makes:
	// latencies and List order (the injectors AddFault adds draw from
	// their own sources). A run on a
	// simulated clock with a fixed seed replays exactly as long as the
	// requests arrive in the same order.
	Seed uint64
	// Clock drives the latency waits. Nil means the wall clock.
	Clock Clock
}

// Cluster is an in-memory object store deployment: one bucket per AZ,
// shared by the stores that Store hands out, with one latency model, one
// set of faults and one set of counters. It is safe for concurrent use.
type Cluster struct {
	clock   Clock
	profile Profile
	waits   bool // profile can make a request wait

	// buckets and byAZ are fixed at construction and only read after.
	buckets map[string]*bucket
	byAZ    map[string]*bucket

	// faults decides each request's injected fate.
	faults faults.Set

	// mu guards rng and every bucket's outage state.
	mu  sync.Mutex
	rng *rand.Rand

	// spare keeps the memory of a few deleted objects for Put to reuse,
	// so that a store whose objects come and go (a leader's garbage
	// collection) does not allocate every object anew. Object data never
	// leaves the store (reads copy it out under the bucket's lock), so
	// once deleted it is no one's.
	spare *bufpool.Pool
}

// maxSpares bounds the deleted objects' memory kept for reuse: a few
// dozen objects of the usual few MiB.
const maxSpares = 256 << 20

// bucket is one AZ's bucket.
type bucket struct {
	name, az string
	stats    counters

	// down and outage are guarded by Cluster.mu. outage is closed when the
	// bucket goes down, so requests waiting out their latency fail at
	// once; a fresh channel replaces it when the bucket comes back.
	down   bool
	outage chan struct{}

	mu      sync.RWMutex
	objects map[string]object
}

type object struct {
	data     []byte
	modified time.Time
}

// NewCluster validates cfg and returns a cluster with empty buckets.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	if len(cfg.Buckets) == 0 {
		return nil, errors.New("memstore: ClusterConfig.Buckets is empty: want one bucket per AZ")
	}
	// Validate's errors already name the Profile field.
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{
		clock:   cfg.Clock,
		profile: cfg.Profile,
		waits:   !cfg.Profile.zero(),
		buckets: make(map[string]*bucket, len(cfg.Buckets)),
		byAZ:    make(map[string]*bucket, len(cfg.Buckets)),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x6d656d73746f7265)), // "memstore"
		spare:   bufpool.New(maxSpares),
	}
	if c.clock == nil {
		c.clock = wallClock{}
	}
	for _, az := range slices.Sorted(maps.Keys(cfg.Buckets)) {
		name := cfg.Buckets[az]
		switch {
		case az == "":
			return nil, fmt.Errorf("memstore: ClusterConfig.Buckets: empty AZ name (bucket %q)", name)
		case name == "":
			return nil, fmt.Errorf("memstore: ClusterConfig.Buckets[%q]: empty bucket name", az)
		case c.buckets[name] != nil:
			return nil, fmt.Errorf("memstore: ClusterConfig.Buckets: bucket %q is named for AZs %q and %q",
				name, c.buckets[name].az, az)
		}
		b := &bucket{name: name, az: az, outage: make(chan struct{}), objects: make(map[string]object)}
		c.buckets[name] = b
		c.byAZ[az] = b
	}
	return c, nil
}

// Store returns the view of the cluster of a broker in az: it writes to
// az's bucket and reads, lists and deletes in any bucket of the cluster.
// Stores of one cluster share its buckets, faults and counters.
func (c *Cluster) Store(az string) (*Store, error) {
	b := c.byAZ[az]
	if b == nil {
		return nil, fmt.Errorf("memstore: no bucket for AZ %q (configured: %v)", az, slices.Sorted(maps.Keys(c.byAZ)))
	}
	return &Store{c: c, local: b}, nil
}

// SetOutage takes az's bucket down or brings it back. While it is down,
// every request to it fails with storage.ErrUnavailable, including those
// already waiting out their latency when it went down; a Put so cut short
// stores nothing. Objects survive an outage.
func (c *Cluster) SetOutage(az string, down bool) error {
	b := c.byAZ[az]
	if b == nil {
		return fmt.Errorf("memstore: SetOutage: no bucket for AZ %q", az)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.down == down {
		return nil
	}
	b.down = down
	if down {
		close(b.outage)
	} else {
		b.outage = make(chan struct{})
	}
	return nil
}

// AddFault puts every later request of the cluster's stores to inj, once
// per request as S3 would count them (see Store.Delete and Store.List),
// until remove is called. Several injectors combine as faults.Any
// combines them; an injected delay adds to the request's latency, and an
// outage still fails the request first. inj runs outside the cluster's
// lock, and may call its methods.
func (c *Cluster) AddFault(inj faults.Injector) (remove func()) {
	return c.faults.Add(inj)
}

// ClearFaults removes every injector AddFault added.
func (c *Cluster) ClearFaults() { c.faults.Clear() }

// Stats returns the cluster's counters. The snapshot is exact when no
// request is in flight; taken during requests, each counter is exact but
// they may be from slightly different instants.
func (c *Cluster) Stats() Stats {
	s := Stats{Buckets: make(map[string]Counters, len(c.buckets))}
	for name, b := range c.buckets {
		bc := b.stats.snapshot()
		s.Buckets[name] = bc
		s.Total = s.Total.plus(bc)
	}
	return s
}

// ResetStats sets every counter to zero.
func (c *Cluster) ResetStats() {
	for _, b := range c.buckets {
		b.stats.reset()
	}
}

// admission is what the cluster decided about one request before it runs.
type admission struct {
	latency time.Duration
	outage  <-chan struct{}
	effect  faults.Effect
}

// admit decides one request's fate: unavailable at once if its bucket is
// down, otherwise its latency and what the injected faults do to it.
func (c *Cluster) admit(ctx context.Context, b *bucket, req faults.Request, size int64) (admission, error) {
	eff := c.faults.Inject(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.down {
		return admission{}, fmt.Errorf("bucket %s of AZ %s is down: %w", b.name, b.az, storage.ErrUnavailable)
	}
	a := admission{outage: b.outage, effect: eff, latency: eff.Delay}
	if c.waits {
		a.latency += c.profile.latency(req.Op).sample(size, c.rng.NormFloat64())
		if req.StoreAZ != req.AZ {
			lo, hi := c.profile.CrossAZMin, c.profile.CrossAZMax
			a.latency += lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
		}
	}
	return a, nil
}

// shuffle puts infos in a seeded random order, so that no caller comes
// to depend on an order S3 Express does not give.
func (c *Cluster) shuffle(infos []storage.ObjectInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rng.Shuffle(len(infos), func(i, j int) { infos[i], infos[j] = infos[j], infos[i] })
}
