package disklog

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
	"github.com/activetier/activetier/walstore/walstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLocalLogConformance runs walstore's LocalLog suite, with segments
// small enough that most logs span several files.
func TestLocalLogConformance(t *testing.T) {
	opts := Options{SegmentBytes: 300}
	walstoretest.RunLocalLog(t, walstoretest.LocalLogHarness{
		New: func(ctx context.Context, t *testing.T) walstore.LocalLog {
			return open(t, t.TempDir(), opts)
		},
		Reopen: func(ctx context.Context, t *testing.T, l walstore.LocalLog) walstore.LocalLog {
			old := l.(*Log)
			require.NoError(t, old.Close())
			return open(t, old.Dir(), opts)
		},
	})
}

var tp = metadata.TopicPartition{Topic: "logs", Partition: 3}

func batch(epoch int32, first, last int64) combiner.Batch {
	data := make([]byte, 50+first%17)
	for i := range data {
		data[i] = byte(first) + byte(i)
	}
	return combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: 1000 + last, Data: data}
}

func readAll(t *testing.T, l *Log) []combiner.Batch {
	t.Helper()
	got, err := l.Read(t.Context(), tp, 0, 1<<30)
	require.NoError(t, err)
	return got
}

// segmentFiles returns tp's segment paths, oldest first.
func segmentFiles(t *testing.T, l *Log) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(l.Dir(), dirName(tp), "*"+segmentSuffix))
	require.NoError(t, err)
	return m
}

// TestRecovery damages a log's files as a crash or a bad disk would and
// checks what Open keeps: every frame before the damage, nothing after.
func TestRecovery(t *testing.T) {
	all := []combiner.Batch{batch(1, 0, 4), batch(1, 5, 9), batch(2, 10, 14), batch(2, 15, 19), batch(3, 20, 24), batch(3, 25, 29)}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, segs []string)
		keep   int // batches that survive
		epochs []fencing.EpochEntry
	}{
		{"clean", func(t *testing.T, segs []string) {}, 6, []fencing.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"torn last frame", func(t *testing.T, segs []string) { shrink(t, segs[len(segs)-1], 7) }, 5, []fencing.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"torn frame header", func(t *testing.T, segs []string) { appendBytes(t, segs[len(segs)-1], []byte{0, 0}) }, 6, []fencing.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"garbage length after the last frame", func(t *testing.T, segs []string) {
			appendBytes(t, segs[len(segs)-1], []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
		}, 6, []fencing.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"flipped byte in the second segment drops it and the rest", func(t *testing.T, segs []string) { flip(t, segs[1], 40) }, 2, []fencing.EpochEntry{ep(1, 0)}},
		{"a segment lost", func(t *testing.T, segs []string) { require.NoError(t, os.Remove(segs[1])) }, 2, []fencing.EpochEntry{ep(1, 0)}},
		{"checkpoint lost", func(t *testing.T, segs []string) {
			require.NoError(t, os.Remove(filepath.Join(filepath.Dir(segs[0]), checkpointName)))
		}, 6, []fencing.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{SegmentBytes: 150})
			require.NoError(t, err)
			for _, b := range all {
				require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{b}))
			}
			segs := segmentFiles(t, l)
			require.Len(t, segs, 3, "two batches a segment")
			require.NoError(t, l.Close())
			c.damage(t, segs)

			l = open(t, dir, Options{SegmentBytes: 150})
			require.Equal(t, all[:c.keep], readAll(t, l))
			end, err := l.EndOffset(tp)
			require.NoError(t, err)
			require.Equal(t, all[c.keep-1].LastOffset+1, end)
			epochs, err := l.Epochs(tp)
			require.NoError(t, err)
			require.Equal(t, c.epochs, epochs)
			// It goes on from where recovery left it.
			next := batch(4, end, end+4)
			require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{next}))
			require.Equal(t, append(all[:c.keep:c.keep], next), readAll(t, l))
		})
	}
}

// TestAssignEpochSurvives: an epoch assigned at the end before any record
// of it (a new leader's) is still there after a restart, and goes away
// with a truncation below it.
func TestAssignEpochSurvives(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{batch(1, 0, 9)}))
	require.NoError(t, l.AssignEpoch(tp, 4))
	require.NoError(t, l.AssignEpoch(tp, 4), "the same epoch again changes nothing")
	require.ErrorIs(t, l.AssignEpoch(tp, 2), walstore.ErrNotContiguous)
	require.NoError(t, l.Close())

	l = open(t, dir, Options{})
	epochs, err := l.Epochs(tp)
	require.NoError(t, err)
	require.Equal(t, []fencing.EpochEntry{ep(1, 0), ep(4, 10)}, epochs)
	require.ErrorIs(t, l.Append(t.Context(), tp, []combiner.Batch{batch(3, 10, 12)}), walstore.ErrNotContiguous, "an epoch below the assigned one")
	require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{batch(4, 10, 12)}))
	require.NoError(t, l.Truncate(t.Context(), tp, 10))
	epochs, err = l.Epochs(tp)
	require.NoError(t, err)
	require.Equal(t, []fencing.EpochEntry{ep(1, 0)}, epochs)
}

// TestInterruptedStartOver: a crash after a truncation to a new start
// wrote its checkpoint but before it removed the segments.
func TestInterruptedStartOver(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{batch(1, 0, 9), batch(1, 10, 19)}))
	segs := segmentFiles(t, l)
	saved, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	require.NoError(t, l.Truncate(t.Context(), tp, 0)) // at the first record: empties the log
	require.NoError(t, l.Close())
	require.NoError(t, os.WriteFile(segs[0], saved, 0o644)) // as if never removed

	l = open(t, dir, Options{})
	end, err := l.EndOffset(tp)
	require.NoError(t, err)
	require.Equal(t, int64(0), end)
	require.Empty(t, readAll(t, l))
}

func TestInvalidPartition(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	for _, bad := range []metadata.TopicPartition{{Topic: "../etc", Partition: 0}, {Topic: "", Partition: 0}, {Topic: "..", Partition: 1}, {Topic: "a/b", Partition: 0}, {Topic: "ok", Partition: -1}} {
		_, err := l.EndOffset(bad)
		require.ErrorIs(t, err, ErrInvalidPartition, "%v", bad)
		require.ErrorIs(t, l.Append(t.Context(), bad, []combiner.Batch{batch(0, 0, 0)}), ErrInvalidPartition)
	}
}

// TestReadDetectsDamage: bytes damaged while the log is open are an
// error, never records.
func TestReadDetectsDamage(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{batch(1, 0, 9)}))
	flip(t, segmentFiles(t, l)[0], 45)
	_, err := l.Read(t.Context(), tp, 0, 1<<20)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestClosed(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Append(t.Context(), tp, []combiner.Batch{batch(1, 0, 0)}), ErrClosed)
	_, err = l.Read(t.Context(), tp, 0, 10)
	require.ErrorIs(t, err, ErrClosed)
}

func ep(epoch int32, start int64) fencing.EpochEntry {
	return fencing.EpochEntry{Epoch: epoch, StartOffset: start}
}

func shrink(t *testing.T, path string, by int64) {
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-by))
}

func appendBytes(t *testing.T, path string, b []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func flip(t *testing.T, path string, at int64) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
}
