package faults

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Injector decides the fate of each operation a wrapper makes. Inject is
// called once per operation, before it runs, and may be called
// concurrently; ctx is the operation's.
type Injector interface {
	Inject(ctx context.Context, req Request) Effect
}

// Func is an Injector written as a function.
type Func func(ctx context.Context, req Request) Effect

// Inject calls f.
func (f Func) Inject(ctx context.Context, req Request) Effect { return f(ctx, req) }

// Always returns an Injector that gives every operation e.
func Always(e Effect) Injector {
	return Func(func(context.Context, Request) Effect { return e })
}

// Fail fails every operation with err before it runs.
func Fail(err error) Injector { return Always(Effect{Err: err}) }

// FailAfter fails every operation with err after it took effect.
func FailAfter(err error) Injector { return Always(Effect{Err: err, AfterApply: true}) }

// Delay slows every operation down by d. It panics if d is negative.
func Delay(d time.Duration) Injector {
	if d < 0 {
		panic(fmt.Sprintf("faults: Delay %v is negative", d))
	}
	return Always(Effect{Delay: d})
}

// Corrupt changes one byte of what every read returns, a byte and a value
// drawn from a source seeded with seed.
func Corrupt(seed uint64) Injector {
	var mu sync.Mutex
	src := rand.New(rand.NewPCG(seed, 0x636f7272757074)) // "corrupt"
	return Func(func(context.Context, Request) Effect {
		mu.Lock()
		defer mu.Unlock()
		return Effect{Corrupt: src.Uint64() | 1}
	})
}

// On applies inj to the requests match selects, and nothing to the
// others; inj is not consulted for those.
func On(match func(Request) bool, inj Injector) Injector {
	return Func(func(ctx context.Context, req Request) Effect {
		if !match(req) {
			return Effect{}
		}
		return inj.Inject(ctx, req)
	})
}

// IsOp returns a predicate, for On, that selects the requests of ops.
func IsOp(ops ...Op) func(Request) bool {
	return func(r Request) bool { return slices.Contains(ops, r.Op) }
}

// Rate applies inj to a fraction p of the requests it sees, drawn from a
// source seeded with seed, so that one seed gives one sequence of hits
// for one sequence of requests. It panics unless p is in [0, 1].
func Rate(p float64, seed uint64, inj Injector) Injector {
	if p < 0 || p > 1 || math.IsNaN(p) {
		panic(fmt.Sprintf("faults: Rate %v is not a probability in [0, 1]", p))
	}
	var mu sync.Mutex
	src := rand.New(rand.NewPCG(seed, 0x72617465)) // "rate"
	return Func(func(ctx context.Context, req Request) Effect {
		mu.Lock()
		hit := src.Float64() < p
		mu.Unlock()
		if !hit {
			return Effect{}
		}
		return inj.Inject(ctx, req)
	})
}

// Once applies inj until it first has an effect, and nothing after: a
// one-shot fault. Wrap inj in On to choose the request it hits.
func Once(inj Injector) Injector {
	var mu sync.Mutex
	done := false
	return Func(func(ctx context.Context, req Request) Effect {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return Effect{}
		}
		e := inj.Inject(ctx, req)
		done = !e.Zero()
		return e
	})
}

// Any applies every one of injs, in order, and combines their effects as
// Effect.And does: delays add up, the first error and the first
// corruption win. Each is consulted for every request.
func Any(injs ...Injector) Injector {
	injs = slices.Clone(injs)
	return Func(func(ctx context.Context, req Request) Effect {
		return combine(ctx, req, injs)
	})
}

func combine(ctx context.Context, req Request, injs []Injector) Effect {
	var e Effect
	for _, inj := range injs {
		e = e.And(inj.Inject(ctx, req))
	}
	return e
}

// Set is an Injector made of the injectors added to it, applied as Any
// applies them; they can be added and removed while operations run. The
// zero Set is empty and ready to use.
type Set struct {
	mu   sync.Mutex
	injs []*Injector
}

// Add applies inj to every later request until remove is called.
func (s *Set) Add(inj Injector) (remove func()) {
	p := &inj
	s.mu.Lock()
	s.injs = append(s.injs, p)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.injs = slices.DeleteFunc(s.injs, func(q *Injector) bool { return q == p })
	}
}

// Clear removes every injector.
func (s *Set) Clear() {
	s.mu.Lock()
	s.injs = nil
	s.mu.Unlock()
}

// Inject applies the injectors of the set, outside its lock, so that one
// may add to or remove from the set.
func (s *Set) Inject(ctx context.Context, req Request) Effect {
	s.mu.Lock()
	injs := make([]Injector, len(s.injs))
	for i, p := range s.injs {
		injs[i] = *p
	}
	s.mu.Unlock()
	return combine(ctx, req, injs)
}

// Outage is a switch per bucket: while a bucket is down, every
// object-store request addressing it fails before it runs. The zero
// Outage has every bucket up and fails with no error; use NewOutage.
type Outage struct {
	err  error
	mu   sync.Mutex
	down map[string]bool
}

// NewOutage returns an Outage whose requests fail with err (wrapped in an
// *Error), every bucket up.
func NewOutage(err error) *Outage {
	return &Outage{err: err, down: make(map[string]bool)}
}

// SetDown takes bucket down, or brings it back.
func (o *Outage) SetDown(bucket string, down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if down {
		o.down[bucket] = true
	} else {
		delete(o.down, bucket)
	}
}

// Down reports whether bucket is down, for a layer below the stores (an
// HTTP transport, say) that refuses requests itself.
func (o *Outage) Down(bucket string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down[bucket]
}

// Inject fails an object-store request to a bucket that is down, and a
// Delete of an object in one.
func (o *Outage) Inject(_ context.Context, req Request) Effect {
	o.mu.Lock()
	defer o.mu.Unlock()
	buckets := []string{req.Bucket}
	switch {
	case req.Op == OpDelete:
		buckets = buckets[:0]
		for _, ref := range req.Refs {
			buckets = append(buckets, ref.Bucket)
		}
	case req.Op > OpList:
		return Effect{}
	}
	for _, b := range buckets {
		if o.down[b] {
			return Effect{Err: fmt.Errorf("bucket %s is down: %w", b, o.err)}
		}
	}
	return Effect{}
}
