package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seedRange reads ACTIVETIER_SIM_FIRST_SEED (default 1) and
// ACTIVETIER_SIM_SEEDS (default def).
func seedRange(t *testing.T, def uint64) (first, n uint64) {
	t.Helper()
	first, n = 1, def
	for _, v := range []struct {
		name string
		dst  *uint64
	}{{"ACTIVETIER_SIM_FIRST_SEED", &first}, {"ACTIVETIER_SIM_SEEDS", &n}} {
		if s := os.Getenv(v.name); s != "" {
			x, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("%s=%q: %v", v.name, s, err)
			}
			*v.dst = x
		}
	}
	return first, n
}

// runSeed runs one seed. A panic names the seed that caused it. With
// ACTIVETIER_SIM_TRACE_DIR set, the seed's whole trace, the engines' logs
// included (logging changes nothing in a run), goes to DIR/seed-N.trace.
func runSeed(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := tryRunSeed(cfg)
	if err != nil {
		t.Fatalf("%v\nreplay with: %s", err, replayCommand(cfg.Seed, t.Name()))
	}
	return res
}

// tryRunSeed is runSeed for any goroutine: it returns what runSeed would
// fail the test with.
func tryRunSeed(cfg Config) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("seed %d: %v", cfg.Seed, r)
		}
	}()
	dir := os.Getenv("ACTIVETIER_SIM_TRACE_DIR")
	if dir == "" {
		return Run(cfg), nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("seed-%d.trace", cfg.Seed)))
	if err != nil {
		return nil, fmt.Errorf("ACTIVETIER_SIM_TRACE_DIR: %w", err)
	}
	bw := bufio.NewWriter(f)
	cfg.TraceWriter, cfg.Verbose = bw, true
	res = Run(cfg)
	if err := errors.Join(bw.Flush(), f.Close()); err != nil {
		return nil, fmt.Errorf("ACTIVETIER_SIM_TRACE_DIR: %w", err)
	}
	return res, nil
}

func replayCommand(seed uint64, test string) string {
	return fmt.Sprintf("ACTIVETIER_SIM_FIRST_SEED=%d ACTIVETIER_SIM_SEEDS=1 go test ./internal/harness/sim -run '^%s$' -v", seed, test)
}

// report fails t with a run's violations, its shape, the end of its trace
// and the command that replays it.
func report(t *testing.T, res *Result, test string, traceLines int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d broke %d invariant(s):\n", res.Seed, len(res.Violations))
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "shape: %s\n", res.Shape)
	if n := len(res.Trace); n > 0 && traceLines > 0 {
		from := max(0, n-traceLines)
		fmt.Fprintf(&b, "last %d trace lines:\n%s\n", n-from, strings.Join(res.Trace[from:], "\n"))
	}
	fmt.Fprintf(&b, "replay with: %s", replayCommand(res.Seed, test))
	// ACTIVETIER_SIM_TRACE_FILE keeps the whole trace of a failing seed
	// (a replay prints it too, with the engines' logs).
	if path := os.Getenv("ACTIVETIER_SIM_TRACE_FILE"); path != "" {
		if err := os.WriteFile(path, []byte(strings.Join(res.Trace, "\n")+"\n"), 0o644); err != nil {
			fmt.Fprintf(&b, "\nwriting the trace: %v", err)
		} else {
			fmt.Fprintf(&b, "\nwhole trace in %s", path)
		}
	}
	t.Error(b.String())
}

// TestSimulation runs the whole-cluster simulation for a range of seeds
// and fails on the first seed that breaks an invariant. A replay (one
// seed) logs the run's full trace, with the engines' own logs.
func TestSimulation(t *testing.T) {
	first, n := seedRange(t, 300)
	replay := n == 1
	var total Stats
	for seed := first; seed < first+n; seed++ {
		res := runSeed(t, Config{Seed: seed, Verbose: replay})
		if replay {
			t.Logf("seed %d: %s\ntrace:\n%s", seed, res.Shape, strings.Join(res.Trace, "\n"))
			t.Logf("stats: %+v; simulated %v", res.Stats, res.SimTime)
		}
		if res.Failed() {
			report(t, res, "TestSimulation", 80)
			return
		}
		total.add(res.Stats)
	}
	t.Logf("%d seeds from %d: %+v", n, first, total)
}

func (s *Stats) add(o Stats) {
	s.Steps += o.Steps
	s.Produced += o.Produced
	s.Rejected += o.Rejected
	s.ZombieProduced += o.ZombieProduced
	s.Elections += o.Elections
	s.Zombies += o.Zombies
	s.Crashes += o.Crashes
	s.FollowerRestarts += o.FollowerRestarts
	s.Reassignments += o.Reassignments
	s.Outages += o.Outages
	s.Faults += o.Faults
	s.Trims += o.Trims
	s.Applied += o.Applied
	s.Truncations += o.Truncations
	s.Objects += o.Objects
	s.Deleted += o.Deleted
	s.NotFound += o.NotFound
	s.FencedAppends += o.FencedAppends
	s.DurableClaims += o.DurableClaims
	s.ReaderBatches += o.ReaderBatches
	s.ReaderGone += o.ReaderGone
	s.ReaderGoneBusy += o.ReaderGoneBusy
	s.DigestChecks += o.DigestChecks
	s.Converged = max(s.Converged, o.Converged)
}

// TestWeakenedFencingIsCaught shows the simulation can fail: with one
// fencing rule weakened (Config.WeakFencing: a follower applies an entry
// fencing drops as fenced by a newer epoch), some seed of the CI budget
// reports a fenced append, and the same seed passes with the rule intact
// (Config.ReferenceFollower), so the weakening, not the follower that
// carries it, is what the simulation caught.
func TestWeakenedFencingIsCaught(t *testing.T) {
	first, n := seedRange(t, 300)
	for seed := first; seed < first+n; seed++ {
		weak := runSeed(t, Config{Seed: seed, WeakFencing: true})
		var caught *Violation
		for i, v := range weak.Violations {
			if v.Kind == KindFencedAppend {
				caught = &weak.Violations[i]
				break
			}
		}
		if caught == nil {
			continue
		}
		t.Logf("seed %d, %d seeds in: %s", seed, seed-first+1, caught)
		control := runSeed(t, Config{Seed: seed, ReferenceFollower: true})
		if control.Failed() {
			report(t, control, "TestWeakenedFencingIsCaught", 40)
		}
		return
	}
	t.Fatalf("no fenced append reported in %d seeds from %d with fencing weakened", n, first)
}

// TestWeakenedReaderIsCaught shows the reader invariants can fail: with
// the direct readers' commit check off (Config.DurableReaders: they serve
// every record published, as directread's Durable does), some seed of the
// CI budget reports a reader that yielded a record a later leader
// truncated, and the same seed passes with the check on, so the
// weakening, not the seed, is what the simulation caught.
func TestWeakenedReaderIsCaught(t *testing.T) {
	first, n := seedRange(t, 300)
	for seed := first; seed < first+n; seed++ {
		weak := runSeed(t, Config{Seed: seed, DurableReaders: true})
		var caught *Violation
		for i, v := range weak.Violations {
			if v.Kind == KindReaderTruncated {
				caught = &weak.Violations[i]
				break
			}
		}
		if caught == nil {
			continue
		}
		t.Logf("seed %d, %d seeds in: %s", seed, seed-first+1, caught)
		if control := runSeed(t, Config{Seed: seed}); control.Failed() {
			report(t, control, "TestWeakenedReaderIsCaught", 40)
		}
		return
	}
	t.Fatalf("no truncated yield reported in %d seeds from %d with the readers' commit check off", n, first)
}

// TestReferenceFollower runs the simulation with the reference follower
// and fencing intact for the first seeds: the control for
// TestWeakenedFencingIsCaught, over more than the one seed it reruns.
func TestReferenceFollower(t *testing.T) {
	first, n := seedRange(t, 30)
	for seed := first; seed < first+n; seed++ {
		if res := runSeed(t, Config{Seed: seed, ReferenceFollower: true}); res.Failed() {
			report(t, res, "TestReferenceFollower", 40)
			return
		}
	}
}

// TestReplay runs the first seeds twice, with the engines' logs in the
// trace, and requires each seed's two traces to be identical, byte for
// byte: a seed fixes the whole run.
func TestReplay(t *testing.T) {
	first, n := seedRange(t, 50)
	for seed := first; seed < first+n; seed++ {
		var a, b bytes.Buffer
		Run(Config{Seed: seed, Verbose: true, TraceWriter: &a})
		Run(Config{Seed: seed, Verbose: true, TraceWriter: &b})
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			x, y := strings.Split(a.String(), "\n"), strings.Split(b.String(), "\n")
			i := 0
			for i < len(x) && i < len(y) && x[i] == y[i] {
				i++
			}
			t.Fatalf("seed %d: the two runs' traces differ from line %d:\n  %s\n  %s", seed, i+1, line(x, i), line(y, i))
		}
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of trace)"
}

// TestSimContract runs the simulation with the adversarial broker
// (Config.Attacks) for a range of seeds, the contract's model judging
// every call it makes, and requires every seed to pass and to replay
// exactly: the same seed, run again, gives the same trace. Seeds run
// ACTIVETIER_SIM_PARALLEL at a time (default 1).
func TestSimContract(t *testing.T) {
	first, n := seedRange(t, 300)
	replay := n == 1
	par := 1
	if s := os.Getenv("ACTIVETIER_SIM_PARALLEL"); s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 {
			t.Fatalf("ACTIVETIER_SIM_PARALLEL=%q: want a positive number", s)
		}
		par = p
	}
	type outcome struct {
		res    *Result
		err    error
		digest uint64
	}
	results := make([]outcome, n)
	run := func(i uint64) {
		d := xxhash.New()
		res, err := tryRunSeed(Config{Seed: first + i, Attacks: true, Verbose: replay, TraceWriter: d})
		results[i] = outcome{res, err, d.Sum64()}
	}
	var wg sync.WaitGroup
	next := make(chan uint64)
	for range par {
		wg.Go(func() {
			for i := range next {
				run(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	var total Stats
	var failed []uint64 // every failing seed, so that one long run finds them all
	for i, o := range results {
		seed := first + uint64(i)
		if replay && o.err == nil {
			t.Logf("seed %d: %s\ntrace:\n%s", seed, o.res.Shape, strings.Join(o.res.Trace, "\n"))
		}
		if o.err != nil || o.res.Failed() {
			failed = append(failed, seed)
			continue
		}
		total.add(o.res.Stats)
	}
	if len(failed) > 0 {
		t.Logf("%d of %d seeds from %d failed: %v", len(failed), n, first, failed)
		o := results[failed[0]-first]
		if o.err != nil {
			t.Fatalf("%v\nreplay with: %s", o.err, replayCommand(failed[0], "TestSimContract"))
		}
		report(t, o.res, "TestSimContract", 80)
		return
	}
	// Replay a few seeds: the same seed gives the same trace. (A trace
	// directory takes the first runs' traces instead.)
	for i := uint64(0); i < n && os.Getenv("ACTIVETIER_SIM_TRACE_DIR") == ""; i += max(1, n/5) {
		d := xxhash.New()
		Run(Config{Seed: first + i, Attacks: true, Verbose: replay, TraceWriter: d})
		if d.Sum64() != results[i].digest {
			t.Fatalf("seed %d: a second run's trace differs from the first's", first+i)
		}
	}
	t.Logf("%d seeds from %d with attacks: %+v", n, first, total)
}

// weakenedIsCaught runs seeds with attacks and the library weakened as
// weak says until one reports a violation of one of kinds, and requires
// the same seed to pass with the library intact: the weakening, not the
// seed, is what the model caught.
func weakenedIsCaught(t *testing.T, weak Weakening, kinds ...Kind) {
	t.Helper()
	first, n := seedRange(t, 300)
	for seed := first; seed < first+n; seed++ {
		res := runSeed(t, Config{Seed: seed, Attacks: true, Weaken: weak})
		var caught *Violation
		for i, v := range res.Violations {
			if slices.Contains(kinds, v.Kind) {
				caught = &res.Violations[i]
				break
			}
		}
		if caught == nil {
			continue
		}
		t.Logf("seed %d, %d seeds in: %s", seed, seed-first+1, caught)
		if control := runSeed(t, Config{Seed: seed, Attacks: true}); control.Failed() {
			report(t, control, t.Name(), 40)
		}
		return
	}
	t.Fatalf("no %v reported in %d seeds from %d with %+v", kinds, n, first, weak)
}

// (a) A wait answered by a later leadership of the partition, or a
// BecomeLeader at an epoch not above the one followed, is caught.
func TestWeakenedLateIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{Late: true}, KindAckLost, KindBadTransition)
}

// (b) A Sweep that deletes an object a live leadership still means to
// publish (its metadata log down longer than the sweep age) is caught.
func TestWeakenedSweepIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{Sweep: true}, KindSweptUnpublished)
}

// (c) A refused BecomeLeader that stopped following first is caught.
func TestWeakenedRefusedIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{Refused: true}, KindRoleLost)
}

// (d) A BecomeFollower that resigned before its context ended is caught.
func TestWeakenedCancelledIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{Cancelled: true}, KindRoleLost)
}

// (e) An Append blocked on a full buffer that outlives its leadership is
// caught.
func TestWeakenedAppendIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{Append: true}, KindAppendOutlived)
}

// (f) A leadership's background failure hidden from Health is caught.
func TestWeakenedHealthIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{Health: true}, KindFailureHidden)
}

// (g) Followers that stop reporting while idle, so that one restarted
// behind what the store retains is never caught up, are caught.
func TestWeakenedCatchUpIsCaught(t *testing.T) {
	weakenedIsCaught(t, Weakening{CatchUp: true}, KindFollowerStuck)
}

// TestSimContractSeedsThatFailed replays the seeds of long contract runs
// that found a library bug (or one of the harness's controller), each
// fixed since: a DELETE that failed after deleting (2072), an election of
// a replica without the committed records (5546), a catch-up copy swept
// while its entries were being published (6401), and a republish that
// counted its own collected copies as reaching its followers (9267,
// 11812). They depend on the schedule, so each fix also has a test of its
// own; these keep the schedules that found them.
func TestSimContractSeedsThatFailed(t *testing.T) {
	for _, seed := range []uint64{2072, 5546, 6401, 9267, 11812} {
		res := runSeed(t, Config{Seed: seed, Attacks: true})
		if res.Failed() {
			report(t, res, t.Name(), 40)
		}
	}
}
