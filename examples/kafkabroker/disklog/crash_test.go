package disklog_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The crash test's knobs. A run is replayed with its seed:
//
//	ACTIVETIER_CRASH_SEED=1234 go test -run TestCrash ./examples/kafkabroker/disklog/
//
// and the long form is ACTIVETIER_CRASH_RUNS=500.
const (
	crashSeedEnv  = "ACTIVETIER_CRASH_SEED"
	crashRunsEnv  = "ACTIVETIER_CRASH_RUNS"
	crashChildEnv = "ACTIVETIER_CRASH_CHILD" // "<dir> <seed>": this process is the one killed
)

var crashTP = metadata.TopicPartition{Topic: "crash", Partition: 0}

// crashOptions are the child's and the recovery's: segments small enough
// that the runs roll many of them.
var crashOptions = disklog.Options{SegmentBytes: 256 << 10}

const crashOps = 24

// crashOp is one call the child makes: an Append of batches, or a
// Truncate at offset.
type crashOp struct {
	batches  []storage.Batch
	truncate bool
	offset   int64
}

// crashModel is what the log holds after some prefix of the operations.
type crashModel struct {
	start   int64
	batches []storage.Batch
}

func (m crashModel) end() int64 {
	if n := len(m.batches); n > 0 {
		return m.batches[n-1].LastOffset + 1
	}
	return m.start
}

func (m crashModel) apply(o crashOp) crashModel {
	if !o.truncate {
		return crashModel{start: m.start, batches: append(m.batches[:len(m.batches):len(m.batches)], o.batches...)}
	}
	switch {
	case len(m.batches) == 0 || o.offset <= m.batches[0].FirstOffset:
		return crashModel{start: o.offset}
	case o.offset >= m.end():
		return m
	}
	i := 0
	for m.batches[i].FirstOffset < o.offset {
		i++
	}
	return crashModel{start: m.start, batches: m.batches[:i:i]}
}

// epochs is the epoch cache the model's batches make.
func (m crashModel) epochs() []storage.EpochEntry {
	var out []storage.EpochEntry
	for _, b := range m.batches {
		if len(out) == 0 || b.Epoch > out[len(out)-1].Epoch {
			out = append(out, storage.EpochEntry{Epoch: b.Epoch, StartOffset: b.FirstOffset})
		}
	}
	return out
}

// crashPlan returns the operations of seed's run: mostly Appends of up to
// 40 batches of up to 16 KiB (one call's write spans many pages, so that
// a kill can land inside it), some starting a new epoch at the call or
// inside it, and now and then a Truncate, most often at a batch boundary
// inside the last call.
func crashPlan(seed uint64) []crashOp {
	rng := rand.New(rand.NewPCG(seed, 0x6469736b6c6f67))
	var (
		m     crashModel
		ops   []crashOp
		epoch int32
		calls []int // index in m.batches of each call's first batch
	)
	for len(ops) < crashOps {
		if len(m.batches) > 0 && rng.IntN(5) == 0 {
			var off int64
			switch r := rng.IntN(10); {
			case r == 0:
				off = m.batches[0].FirstOffset // empties the log
			case r < 8 && len(calls) > 0:
				last := calls[len(calls)-1]
				if last >= len(m.batches) {
					last = 0
				}
				off = m.batches[last+rng.IntN(len(m.batches)-last)].FirstOffset
			default:
				off = m.batches[rng.IntN(len(m.batches))].FirstOffset
			}
			o := crashOp{truncate: true, offset: off}
			ops, m = append(ops, o), m.apply(o)
			continue
		}
		n := 1 + rng.IntN(40)
		if rng.IntN(6) == 0 {
			epoch++
		}
		bumpAt := -1
		if rng.IntN(6) == 0 {
			bumpAt = rng.IntN(n)
		}
		o := crashOp{}
		next := m.end()
		for i := range n {
			if i == bumpAt {
				epoch++
			}
			records := int64(1 + rng.IntN(5))
			data := fill(make([]byte, 1+rng.IntN(16<<10)), rng.Uint64())
			o.batches = append(o.batches, storage.Batch{Epoch: epoch, FirstOffset: next, LastOffset: next + records - 1, MaxTimestamp: next * 10, Data: data})
			next += records
		}
		calls = append(calls, len(m.batches))
		ops, m = append(ops, o), m.apply(o)
	}
	return ops
}

// fill fills data with a pattern of v, each batch's own: cheap to make
// (the race detector slows a byte-by-byte fill) and telling batches apart.
func fill(data []byte, v uint64) []byte {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], v)
	n := copy(data, w[:])
	for n < len(data) {
		n += copy(data[n:], data[:n])
	}
	return data
}

// TestCrash kills a process appending to and truncating a log with
// SIGKILL at a random moment, many times, and checks what Open recovers:
// exactly the log after some prefix of the calls, never part of a call,
// and nothing less than the calls that had returned. The child is this
// test binary, run again as crashChild.
func TestCrash(t *testing.T) {
	if v := os.Getenv(crashChildEnv); v != "" {
		crashChild(t, v)
		return
	}
	runs := 8
	if v := os.Getenv(crashRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, crashRunsEnv)
		runs = n
	}
	base := rand.Uint64() >> 1
	if v := os.Getenv(crashSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, crashSeedEnv)
		base, runs = s, 1
	}
	t.Logf("seeds %d to %d (%s=<seed> replays one)", base, base+uint64(runs)-1, crashSeedEnv)
	inside := map[string]int{}
	var failed []uint64
	for r := range runs {
		seed := base + uint64(r)
		in, ok := crashRun(t, seed)
		inside[in]++
		if !ok {
			failed = append(failed, seed)
		}
	}
	t.Logf("%d runs: killed inside an Append %d times, inside a Truncate %d times, between calls %d times",
		runs, inside["append"], inside["truncate"], inside[""])
	require.Empty(t, failed, "the seeds of the runs that failed; %s=<seed> replays one", crashSeedEnv)
}

// crashRun runs one child, kills it and checks the recovered log. It
// reports the kind of call the kill came inside ("append", "truncate", or
// "" if the child had reported done every call it started) and whether
// the recovered log was right.
func crashRun(t *testing.T, seed uint64) (inside string, ok bool) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir+" "+strconv.FormatUint(seed, 10))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // its lifeline: it exits when this closes
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()

	ops := crashPlan(seed) // while the child starts
	rng := rand.New(rand.NewPCG(seed, 1))
	killAt := rng.IntN(len(ops))
	// When into that call to kill. Two Appends in three are killed when the
	// segment files have grown by a fraction of the call's bytes: inside
	// its write, which is a short part of the call. The rest of the calls
	// are killed a fraction of how long they should take, judged by the
	// calls before, into them.
	byGrowth := rng.IntN(3) != 0 && !ops[killAt].truncate
	frac := 0.3 + 0.8*rng.Float64()
	if byGrowth {
		frac = 0.02 + 0.96*rng.Float64()
	}

	done, started, killed := -1, -1, false
	var went time.Time
	// How long a Truncate takes and an Append a byte, by the latest ones.
	truncTook, perByte := time.Millisecond, float64(time.Millisecond)/(1<<20)
	expect := func(o crashOp) time.Duration {
		if o.truncate {
			return truncTook
		}
		return time.Duration(perByte * float64(dataBytes(o)))
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		kind, n, _ := strings.Cut(sc.Text(), " ")
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= len(ops) {
			continue // not one of crashChild's lines
		}
		switch kind {
		case "ready":
			if killed {
				// The call the kill was aimed at returned before it
				// came, and the child said it was ready for the next
				// one: the kill is on its way, and stdin may already
				// be closed.
				continue
			}
			var target int64
			var size func() int64
			if i == killAt && byGrowth {
				size = segmentBytes(t, dir, ops[i].batches[0].FirstOffset)
				target = size() + int64(frac*float64(dataBytes(ops[i])))
			}
			started, went = i, time.Now()
			_, err := stdin.Write([]byte{1})
			require.NoError(t, err)
			switch {
			case i == killAt && byGrowth:
				// Until the write is under way, or the call is surely
				// over.
				for size() < target && time.Since(went) < 10*expect(ops[i])+time.Second {
				}
			case i == killAt:
				// A spin, not a sleep: the delays are shorter than a
				// sleep's slack.
				for d := time.Duration(frac * float64(expect(ops[i]))); time.Since(went) < d; {
				}
			}
			if i == killAt {
				require.NoError(t, cmd.Process.Kill()) // SIGKILL
				killed = true
			}
		case "done":
			done = i
			if took := time.Since(went); ops[i].truncate {
				truncTook = took
			} else {
				perByte = float64(took) / float64(dataBytes(ops[i]))
			}
		}
	}
	require.NoError(t, sc.Err())
	err = cmd.Wait()
	require.True(t, killed, "seed %d: the child ended before op %d (%v)", seed, killAt, err)
	require.ErrorContains(t, err, "killed", "seed %d", seed)

	// The calls that returned are in; the one under way when the kill
	// came is in wholly or not at all.
	if started > done {
		inside = "append"
		if ops[started].truncate {
			inside = "truncate"
		}
	}
	var before crashModel
	for _, o := range ops[:done+1] {
		before = before.apply(o)
	}
	after := before
	if done+1 < len(ops) {
		after = before.apply(ops[done+1])
	}

	l, err := disklog.Open(dir, crashOptions)
	require.NoError(t, err, "seed %d", seed)
	defer func() { l.Close() }()
	got := recovered(t, l)
	if !got.equal(before) && !got.equal(after) {
		t.Errorf("seed %d: killed during op %d (%s) after %d returned: recovered start %d end %d, %d batches; want end %d (%d batches) or %d (%d batches)",
			seed, done+1, describe(ops, done+1), done+1, got.start, got.end(), len(got.batches), before.end(), len(before.batches), after.end(), len(after.batches))
		return inside, false
	}
	epochs, err := l.Epochs(crashTP)
	require.NoError(t, err)
	if !assert.Equal(t, got.epochs(), epochs, "seed %d: epochs", seed) {
		return inside, false
	}
	// Recovery left a log that recovers to itself.
	require.NoError(t, l.Close())
	l, err = disklog.Open(dir, crashOptions)
	require.NoError(t, err, "seed %d", seed)
	again := recovered(t, l)
	return inside, assert.True(t, again.equal(got), "seed %d: a second recovery changed the log: end %d, then %d", seed, got.end(), again.end())
}

// segmentBytes returns a function that returns the size of the log's
// segment files in dir: those there now, and the one an Append at first
// would start (named by its first offset, as the package doc says). It
// stats only those, to see an Append's write grow them as it goes.
func segmentBytes(t *testing.T, dir string, first int64) func() int64 {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	require.NoError(t, err)
	paths = append(paths, filepath.Join(dir, crashTP.Topic+"-"+strconv.Itoa(int(crashTP.Partition)), fmt.Sprintf("%020d.log", first)))
	return func() int64 {
		var n int64
		for _, p := range paths {
			if st, err := os.Stat(p); err == nil { // the new one may not be there
				n += st.Size()
			}
		}
		return n
	}
}

func dataBytes(o crashOp) int {
	n := 0
	for _, b := range o.batches {
		n += len(b.Data)
	}
	return n
}

func describe(ops []crashOp, i int) string {
	if i >= len(ops) {
		return "none"
	}
	if ops[i].truncate {
		return fmt.Sprintf("truncate at %d", ops[i].offset)
	}
	b := ops[i].batches
	return fmt.Sprintf("append of %d batches, %d-%d", len(b), b[0].FirstOffset, b[len(b)-1].LastOffset)
}

func recovered(t *testing.T, l *disklog.Log) crashModel {
	t.Helper()
	start, err := l.StartOffset(crashTP)
	require.NoError(t, err)
	batches, err := l.Read(t.Context(), crashTP, 0, 1<<30)
	require.NoError(t, err)
	return crashModel{start: start, batches: batches}
}

func (m crashModel) equal(o crashModel) bool {
	if m.start != o.start || len(m.batches) != len(o.batches) {
		return false
	}
	for i, b := range m.batches {
		c := o.batches[i]
		if b.Epoch != c.Epoch || b.FirstOffset != c.FirstOffset || b.LastOffset != c.LastOffset || b.MaxTimestamp != c.MaxTimestamp || string(b.Data) != string(c.Data) {
			return false
		}
	}
	return true
}

// crashChild makes the calls of its seed's plan, each when the parent
// says go (a byte on stdin), saying on stdout when it is ready for each
// and when each returns, until it is killed.
func crashChild(t *testing.T, arg string) {
	dir, s, _ := strings.Cut(arg, " ")
	seed, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	l, err := disklog.Open(dir, crashOptions)
	require.NoError(t, err)
	in := bufio.NewReader(os.Stdin)
	for i, o := range crashPlan(seed) {
		fmt.Fprintf(os.Stdout, "ready %d\n", i)
		if _, err := in.ReadByte(); err != nil {
			return // the parent is gone
		}
		if o.truncate {
			err = l.Truncate(t.Context(), crashTP, o.offset)
		} else {
			err = l.Append(t.Context(), crashTP, o.batches)
		}
		require.NoError(t, err, "op %d", i)
		fmt.Fprintf(os.Stdout, "done %d\n", i)
	}
	_, _ = in.ReadString(0) // wait for the kill
}
