package storagetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// diskLog stands in for a broker's persistent log: a memstore.LocalLog
// whose Reopen copies what a restart must keep (each partition's records,
// or where an empty one starts) into a new one. Its epochs are rebuilt
// from the records' epochs, as a broker's would be if it lost its
// checkpoint file; with logs changed only through the LocalLog interface
// that rebuilds them exactly.
type diskLog struct {
	*memstore.LocalLog
	mu   sync.Mutex
	seen map[metadata.TopicPartition]bool
	// loseStart forgets where an empty partition starts: a broken restart.
	loseStart bool
}

func newDiskLog() *diskLog {
	return &diskLog{LocalLog: memstore.NewLocalLog(), seen: make(map[metadata.TopicPartition]bool)}
}

func (d *diskLog) note(tp metadata.TopicPartition) {
	d.mu.Lock()
	d.seen[tp] = true
	d.mu.Unlock()
}

func (d *diskLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	d.note(tp)
	return d.LocalLog.Append(ctx, tp, batches)
}

func (d *diskLog) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	d.note(tp)
	return d.LocalLog.Truncate(ctx, tp, offset)
}

func (d *diskLog) reopen(t *testing.T) *diskLog {
	ctx := t.Context()
	next := newDiskLog()
	next.loseStart = d.loseStart
	for tp := range d.seen {
		next.seen[tp] = true
		bs := d.Batches(tp)
		end, err := d.EndOffset(tp)
		require.NoError(t, err)
		switch {
		case len(bs) > 0:
			require.NoError(t, next.LocalLog.Truncate(ctx, tp, bs[0].FirstOffset))
			require.NoError(t, next.LocalLog.Append(ctx, tp, bs))
		case !d.loseStart:
			require.NoError(t, next.LocalLog.Truncate(ctx, tp, end))
		}
	}
	return next
}

func diskHarness(loseStart bool) storagetest.LocalLogHarness {
	return storagetest.LocalLogHarness{
		New: func(context.Context, *testing.T) storage.LocalLog {
			d := newDiskLog()
			d.loseStart = loseStart
			return d
		},
		Reopen: func(_ context.Context, t *testing.T, l storage.LocalLog) storage.LocalLog {
			return l.(*diskLog).reopen(t)
		},
	}
}

// TestRunLocalLogWithReopen runs the whole suite, restarts included, on a
// log that survives them.
func TestRunLocalLogWithReopen(t *testing.T) {
	storagetest.RunLocalLog(t, diskHarness(false))
}

// Logs that break one rule of the contract each, over memstore's.

// gapLog takes appends that do not continue the log by starting the log
// over where they begin.
type gapLog struct{ *memstore.LocalLog }

func (g gapLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	if len(batches) > 0 {
		if end, _ := g.EndOffset(tp); batches[0].FirstOffset != end {
			if err := g.LocalLog.Truncate(ctx, tp, batches[0].FirstOffset); err != nil {
				return err
			}
		}
	}
	return g.LocalLog.Append(ctx, tp, batches)
}

// plainErrLog reports every refusal with an untyped error.
type plainErrLog struct{ *memstore.LocalLog }

func (p plainErrLog) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	if err := p.LocalLog.Append(ctx, tp, batches); err != nil {
		return errors.New(err.Error())
	}
	return nil
}

// splitLog truncates inside a batch by dropping the whole batch.
type splitLog struct{ *memstore.LocalLog }

func (s splitLog) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	if bs, err := s.Read(ctx, tp, offset, 1); err == nil && len(bs) > 0 && bs[0].FirstOffset < offset && offset <= bs[0].LastOffset {
		offset = bs[0].FirstOffset
	}
	return s.LocalLog.Truncate(ctx, tp, offset)
}

// greedyLog ignores maxBytes.
type greedyLog struct{ *memstore.LocalLog }

func (g greedyLog) Read(ctx context.Context, tp metadata.TopicPartition, from int64, _ int) ([]storage.Batch, error) {
	return g.LocalLog.Read(ctx, tp, from, 1<<30)
}

// nextBatchLog reads from the first batch starting at or after from.
type nextBatchLog struct{ *memstore.LocalLog }

func (n nextBatchLog) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	bs, err := n.LocalLog.Read(ctx, tp, from, maxBytes)
	if err == nil && len(bs) > 0 && bs[0].FirstOffset < from {
		return n.LocalLog.Read(ctx, tp, bs[0].LastOffset+1, maxBytes)
	}
	return bs, err
}

// stuckStartLog never moves the start of a log without records.
type stuckStartLog struct{ *memstore.LocalLog }

func (s stuckStartLog) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	if bs := s.Batches(tp); len(bs) == 0 {
		return nil
	}
	return s.LocalLog.Truncate(ctx, tp, offset)
}

// keepEpochsLog truncates records but not the epochs.
type keepEpochsLog struct{ *memstore.LocalLog }

func (k keepEpochsLog) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	return nil, nil
}

var mutants = []struct {
	name    string
	harness storagetest.LocalLogHarness
	// fails is the subtest that must catch it.
	fails string
}{
	{"gaps", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return gapLog{l} }), "AppendNotContiguous"},
	{"untyped", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return plainErrLog{l} }), "AppendEpochBackwards"},
	{"split", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return splitLog{l} }), "TruncateInsideBatch"},
	{"greedy", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return greedyLog{l} }), "ReadMaxBytes"},
	{"next-batch", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return nextBatchLog{l} }), "ReadFromInsideBatch"},
	{"stuck-start", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return stuckStartLog{l} }), "TruncateEmptyStartsOver"},
	{"no-epochs", inMemory(func(l *memstore.LocalLog) storage.LocalLog { return keepEpochsLog{l} }), "Epochs"},
	{"restart-at-0", diskHarness(true), "ReopenKeepsStartOffset"},
}

func inMemory(wrap func(*memstore.LocalLog) storage.LocalLog) storagetest.LocalLogHarness {
	return storagetest.LocalLogHarness{
		New:          func(context.Context, *testing.T) storage.LocalLog { return wrap(memstore.NewLocalLog()) },
		InMemoryOnly: true,
	}
}

const mutantEnv = "STORAGETEST_LOCALLOG_MUTANT"

// TestRunLocalLogCatchesBrokenLogs runs the suite on logs that each break
// one rule, in a child process since the suite fails its t, and checks
// that the subtest for that rule fails.
func TestRunLocalLogCatchesBrokenLogs(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		for _, m := range mutants {
			if m.name == name {
				storagetest.RunLocalLog(t, m.harness)
				return
			}
		}
		t.Fatalf("no broken log named %q", name)
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestRunLocalLogCatchesBrokenLogs$/^"+m.fails+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+m.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the suite passed a log that breaks the contract:\n%s", out)
			require.Contains(t, string(out), "--- FAIL: TestRunLocalLogCatchesBrokenLogs/"+m.fails, "%s", out)
		})
	}
}
