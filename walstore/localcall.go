package walstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/activetier/activetier/metadata"
)

// localCalls bounds the engines' calls of the broker's LocalLog, per
// partition. A call runs on a goroutine of its own, so that its caller can
// give up on it when its context ends even if the log ignores the context
// (EndOffset and Epochs take none); a call given up on while it still runs
// is the partition's stuck call, and until it returns every other call of
// the partition is refused at once. Callers hold a partition while they
// call its log, one holder at a time, so a partition never has more than
// one call running, and at most one left behind: a log that hangs costs a
// goroutine per partition, not one per attempt.
//
// Holding a partition is the only lock a caller keeps while the log runs:
// the engines' locks that span partitions (the follower engine's, the
// Node's) are never held across a call, so a partition whose log hangs
// holds up only its own calls and transitions.
type localCalls struct {
	clock Clock
	// wake, if set, is called when a partition is released or its stuck
	// call returns: the follower engine defers a request of a partition
	// someone else holds, and performs it then.
	wake func()
	// stuckChanged, if set, is called when a call is given up on while it
	// runs, and when such a call returns, with no lock held: the Node
	// reports its health again, which lists the partitions stuck.
	stuckChanged func()

	mu    sync.Mutex
	parts map[metadata.TopicPartition]*localPart // partitions held or stuck; others are absent
}

// localPart is one partition's calls.
type localPart struct {
	held  bool
	dep   string        // the call the holder is making, "" between calls
	start time.Time     // when it started
	free  chan struct{} // closed when the holder releases the partition; nil if nobody waits
	stuck *stuckCall
}

// stuckCall is a call of the log whose caller gave up on it; it still
// runs.
type stuckCall struct {
	dep   string
	start time.Time
	// report is the partition's failure while the call is stuck, made
	// once, when it was given up on, so that every Health says the same.
	report error
}

func newLocalCalls(clock Clock) *localCalls {
	if clock == nil {
		clock = wallClock{}
	}
	return &localCalls{clock: clock, parts: make(map[metadata.TopicPartition]*localPart)}
}

// stuckError is the refusal of a call of a partition whose call dep,
// started at start, has not returned since its caller gave up on it.
func (g *localCalls) stuckError(tp metadata.TopicPartition, s *stuckCall) error {
	return fmt.Errorf("walstore: the local log's %s call of %s given up on has not returned: %w", s.dep, tp,
		&DependencyError{Dependency: s.dep, Err: &noAnswerError{d: g.clock.Now().Sub(s.start)}})
}

// part returns tp's entry, made if absent; g.mu held.
func (g *localCalls) part(tp metadata.TopicPartition) *localPart {
	p := g.parts[tp]
	if p == nil {
		p = &localPart{}
		g.parts[tp] = p
	}
	return p
}

// dropIdle forgets tp's entry if nothing holds it; g.mu held.
func (g *localCalls) dropIdle(tp metadata.TopicPartition, p *localPart) {
	if !p.held && p.stuck == nil && p.free == nil {
		delete(g.parts, tp)
	}
}

// hold takes tp for the caller, waiting for its holder to release it as
// long as ctx allows. It fails at once if tp has a stuck call, and with
// ctx's error if ctx ends first; both name the call in the way (the
// holder's, or else want, the call the caller means to make, if any).
// The caller calls release once it has made its calls.
func (g *localCalls) hold(ctx context.Context, tp metadata.TopicPartition, want string) error {
	began := g.clock.Now()
	for {
		g.mu.Lock()
		p := g.part(tp)
		if p.stuck != nil {
			err := g.stuckError(tp, p.stuck)
			g.dropIdle(tp, p)
			g.mu.Unlock()
			return err
		}
		if !p.held {
			p.held = true
			g.mu.Unlock()
			return nil
		}
		if p.free == nil {
			p.free = make(chan struct{})
		}
		free, dep, start := p.free, p.dep, p.start
		if dep == "" {
			dep, start = want, began
		}
		g.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			if dep == "" {
				return fmt.Errorf("walstore: waiting for the local-log calls of %s in flight: %w", tp, ctx.Err())
			}
			return fmt.Errorf("walstore: waiting for the local log's %s call of %s in flight: %w", dep, tp,
				&DependencyError{Dependency: dep, Err: &noAnswerError{d: g.clock.Now().Sub(start), err: ctx.Err()}})
		}
	}
}

// tryHold takes tp if nobody holds it: held reports whether it did, and
// err is set, with held false, if tp has a stuck call.
func (g *localCalls) tryHold(tp metadata.TopicPartition) (held bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.part(tp)
	switch {
	case p.stuck != nil:
		err = g.stuckError(tp, p.stuck)
	case !p.held:
		p.held, held = true, true
	}
	g.dropIdle(tp, p)
	return held, err
}

// release gives up the caller's hold of tp.
func (g *localCalls) release(tp metadata.TopicPartition) {
	g.mu.Lock()
	p := g.part(tp)
	p.held, p.dep = false, ""
	if p.free != nil {
		close(p.free)
		p.free = nil
	}
	g.dropIdle(tp, p)
	g.mu.Unlock()
	if g.wake != nil {
		g.wake()
	}
}

// call makes call dep of tp's log, fn, which the caller holds, and waits
// for it as long as ctx allows. If ctx ends first it returns a
// *DependencyError naming dep that matches ctx's error and storage.ErrUnavailable,
// and fn, still running, is tp's stuck call until it returns; what it then
// returns is dropped. fn gets ctx, for the calls that take one; an error
// it returns comes back in a *DependencyError naming dep.
func (g *localCalls) call(ctx context.Context, tp metadata.TopicPartition, dep string, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return &DependencyError{Dependency: dep, Err: &noAnswerError{err: err}}
	}
	start := g.clock.Now()
	g.mu.Lock()
	p := g.part(tp)
	p.dep, p.start = dep, start
	g.mu.Unlock()
	s := &stuckCall{dep: dep, start: start}
	done := make(chan error, 1)
	go func() {
		done <- fn(ctx)
		g.mu.Lock()
		p := g.parts[tp]
		cleared := p != nil && p.stuck == s
		if cleared {
			p.stuck = nil
			g.dropIdle(tp, p)
		}
		g.mu.Unlock()
		if cleared && g.wake != nil {
			g.wake()
		}
		if cleared && g.stuckChanged != nil {
			g.stuckChanged()
		}
	}()
	select {
	case err := <-done:
		return dependencyError(dep, err)
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case err := <-done:
		g.mu.Unlock()
		return dependencyError(dep, err) // it returned meanwhile, and left nothing behind
	default:
	}
	// The goroutine clears it under mu once fn returns, after this.
	err := &DependencyError{Dependency: dep, Err: &noAnswerError{d: g.clock.Now().Sub(start), err: ctx.Err()}}
	s.report = fmt.Errorf("walstore: the local log's %s call of %s given up on has not returned: %w", dep, tp, err)
	g.part(tp).stuck = s
	g.mu.Unlock()
	if g.stuckChanged != nil {
		g.stuckChanged()
	}
	return err
}

// stuckCalls returns, in partition order, the partitions that have a
// stuck call, each with its failure (as of when the call was given up
// on) and when that call started.
func (g *localCalls) stuckCalls() []stuckPart {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []stuckPart
	for tp, p := range g.parts {
		if p.stuck != nil {
			out = append(out, stuckPart{tp: tp, since: p.stuck.start, err: p.stuck.report})
		}
	}
	slices.SortFunc(out, func(a, b stuckPart) int { return a.tp.Compare(b.tp) })
	return out
}

// stuckOf returns tp's stuck call, if it has one, as stuckCalls does.
func (g *localCalls) stuckOf(tp metadata.TopicPartition) (stuckPart, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.parts[tp]; p != nil && p.stuck != nil {
		return stuckPart{tp: tp, since: p.stuck.start, err: p.stuck.report}, true
	}
	return stuckPart{}, false
}

// stuckPart is a partition with a stuck call (stuckCalls).
type stuckPart struct {
	tp    metadata.TopicPartition
	since time.Time
	err   error
}

// failure is the partition's failure in role while the call is stuck.
func (s stuckPart) failure(role Role) *PartitionError {
	return &PartitionError{Partition: s.tp, Role: role, Since: s.since, Err: s.err, stuck: true}
}

// dependencyError is err, returned by call dep, naming it; nil for nil.
func dependencyError(dep string, err error) error {
	if err == nil {
		return nil
	}
	return &DependencyError{Dependency: dep, Err: err}
}

// do holds tp, makes call dep, fn (see call), and releases tp, all
// within ctx.
func (g *localCalls) do(ctx context.Context, tp metadata.TopicPartition, dep string, fn func(ctx context.Context) error) error {
	if err := g.hold(ctx, tp, dep); err != nil {
		return err
	}
	defer g.release(tp)
	return g.call(ctx, tp, dep, fn)
}
