package disklog

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// TestLocalLogConformance runs storagetest's LocalLog suite, with segments
// small enough that most logs span several files.
func TestLocalLogConformance(t *testing.T) {
	opts := Options{SegmentBytes: 300}
	storagetest.RunLocalLog(t, storagetest.LocalLogHarness{
		New: func(ctx context.Context, t *testing.T) storage.LocalLog {
			return open(t, t.TempDir(), opts)
		},
		Reopen: func(ctx context.Context, t *testing.T, l storage.LocalLog) storage.LocalLog {
			old := l.(*Log)
			require.NoError(t, old.Close())
			return open(t, old.Dir(), opts)
		},
	})
}

var tp = metadata.TopicPartition{Topic: "logs", Partition: 3}

func batch(epoch int32, first, last int64) storage.Batch {
	data := make([]byte, 50+first%17)
	for i := range data {
		data[i] = byte(first) + byte(i)
	}
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: 1000 + last, Data: data}
}

func readAll(t *testing.T, l *Log) []storage.Batch {
	t.Helper()
	got, err := l.Read(t.Context(), tp, 0, 1<<30)
	require.NoError(t, err)
	return got
}

// segmentFiles returns tp's segment paths, oldest first.
func segmentFiles(t testing.TB, l *Log) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(l.Dir(), dirName(tp), "*"+segmentSuffix))
	require.NoError(t, err)
	return m
}

// TestRecovery damages a log's files as a crash or a bad disk would and
// checks what Open keeps: every frame before the damage, nothing after.
func TestRecovery(t *testing.T) {
	all := []storage.Batch{batch(1, 0, 4), batch(1, 5, 9), batch(2, 10, 14), batch(2, 15, 19), batch(3, 20, 24), batch(3, 25, 29)}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, segs []string)
		keep   int // batches that survive
		epochs []storage.EpochEntry
	}{
		{"clean", func(t *testing.T, segs []string) {}, 6, []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"torn last frame", func(t *testing.T, segs []string) { shrink(t, segs[len(segs)-1], 7) }, 5, []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"torn frame header", func(t *testing.T, segs []string) { appendBytes(t, segs[len(segs)-1], []byte{0, 0}) }, 6, []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"garbage length after the last frame", func(t *testing.T, segs []string) {
			appendBytes(t, segs[len(segs)-1], []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
		}, 6, []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
		{"flipped byte in the second segment drops it and the rest", func(t *testing.T, segs []string) { flip(t, segs[1], 40) }, 2, []storage.EpochEntry{ep(1, 0)}},
		{"a segment lost", func(t *testing.T, segs []string) { require.NoError(t, os.Remove(segs[1])) }, 2, []storage.EpochEntry{ep(1, 0)}},
		{"checkpoint lost", func(t *testing.T, segs []string) {
			require.NoError(t, os.Remove(filepath.Join(filepath.Dir(segs[0]), checkpointName)))
		}, 6, []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 20)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{SegmentBytes: 150})
			require.NoError(t, err)
			for _, b := range all {
				require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{b}))
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
			require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{next}))
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
	require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{batch(1, 0, 9)}))
	require.NoError(t, l.AssignEpoch(tp, 4))
	require.NoError(t, l.AssignEpoch(tp, 4), "the same epoch again changes nothing")
	require.ErrorIs(t, l.AssignEpoch(tp, 2), storage.ErrNotContiguous)
	require.NoError(t, l.Close())

	l = open(t, dir, Options{})
	epochs, err := l.Epochs(tp)
	require.NoError(t, err)
	require.Equal(t, []storage.EpochEntry{ep(1, 0), ep(4, 10)}, epochs)
	require.ErrorIs(t, l.Append(t.Context(), tp, []storage.Batch{batch(3, 10, 12)}), storage.ErrNotContiguous, "an epoch below the assigned one")
	require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{batch(4, 10, 12)}))
	require.NoError(t, l.Truncate(t.Context(), tp, 10))
	epochs, err = l.Epochs(tp)
	require.NoError(t, err)
	require.Equal(t, []storage.EpochEntry{ep(1, 0)}, epochs)
}

// TestInterruptedStartOver: a crash after a truncation to a new start
// wrote its checkpoint but before it removed the segments.
func TestInterruptedStartOver(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{batch(1, 0, 9), batch(1, 10, 19)}))
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
		require.ErrorIs(t, l.Append(t.Context(), bad, []storage.Batch{batch(0, 0, 0)}), ErrInvalidPartition)
	}
}

// TestReadDetectsDamage: bytes damaged while the log is open are an
// error, never records.
func TestReadDetectsDamage(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{batch(1, 0, 9)}))
	flip(t, segmentFiles(t, l)[0], 45)
	_, err := l.Read(t.Context(), tp, 0, 1<<20)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestClosed(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Append(t.Context(), tp, []storage.Batch{batch(1, 0, 0)}), ErrClosed)
	_, err = l.Read(t.Context(), tp, 0, 10)
	require.ErrorIs(t, err, ErrClosed)
}

func ep(epoch int32, start int64) storage.EpochEntry {
	return storage.EpochEntry{Epoch: epoch, StartOffset: start}
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

func flip(t *testing.T, path string, at int64) { flipBits(t, path, at, 0x10) }

// flipBits flips the bits of mask in the byte of path at at.
func flipBits(t *testing.T, path string, at int64, mask byte) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= mask
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
}

// copyDir copies the partition directories of src into a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// TestTornCallAtEveryByte cuts the last segment of a log at the lengths
// a crash during its last Append could leave, and checks that recovery
// keeps that call wholly or not at all, and then recovers to the same log
// again. Before the last Append, a Truncate cut the call before it at a
// batch boundary inside it: what is left of that call stays.
func TestTornCall(t *testing.T) {
	first := []storage.Batch{batch(1, 0, 4)}
	cutCall := []storage.Batch{batch(1, 5, 9), batch(2, 10, 14), batch(2, 15, 19), batch(2, 20, 24)}
	last := []storage.Batch{batch(2, 15, 16), batch(3, 17, 20), batch(3, 21, 21)}
	for _, c := range []struct {
		name   string
		before []storage.Batch // the log before the torn call
		setup  func(t *testing.T, l *Log)
	}{
		{"after whole calls", append(first[:1:1], cutCall...), func(t *testing.T, l *Log) {
			require.NoError(t, l.Append(t.Context(), tp, first))
			require.NoError(t, l.Append(t.Context(), tp, cutCall))
		}},
		{"after a call cut by a Truncate", append(first[:1:1], cutCall[:2]...), func(t *testing.T, l *Log) {
			require.NoError(t, l.Append(t.Context(), tp, first))
			require.NoError(t, l.Append(t.Context(), tp, cutCall))
			require.NoError(t, l.Truncate(t.Context(), tp, 15))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{})
			require.NoError(t, err)
			c.setup(t, l)
			next := last
			if end := c.before[len(c.before)-1].LastOffset + 1; end != last[0].FirstOffset {
				next = nil
				for _, b := range last {
					d := end - last[0].FirstOffset
					next = append(next, batch(b.Epoch, b.FirstOffset+d, b.LastOffset+d))
				}
			}
			seg := segmentFiles(t, l)[0]
			st, err := os.Stat(seg)
			require.NoError(t, err)
			require.NoError(t, l.Append(t.Context(), tp, next))
			require.NoError(t, l.Close())
			full, err := os.Stat(seg)
			require.NoError(t, err)

			// Each frame's boundary and the bytes either side of it, the
			// middle of its header, its first byte of data and the middle
			// of its data (each Close syncs, so every byte would make a
			// slow test; the checksum covers all bytes alike).
			var sizes []int64
			at := st.Size()
			for _, b := range next {
				sizes = append(sizes, at, at+1, at+frameHeader/2, at+frameHeader, at+frameHeader+int64(len(b.Data))/2)
				at += int64(frameHeader + len(b.Data))
				sizes = append(sizes, at-1)
			}
			require.Equal(t, full.Size(), at)
			for _, size := range append(sizes, at) {
				d := copyDir(t, dir)
				require.NoError(t, os.Truncate(filepath.Join(d, dirName(tp), filepath.Base(seg)), size))
				want := c.before
				if size == full.Size() {
					want = append(c.before[:len(c.before):len(c.before)], next...)
				}
				for range 2 { // and once more: recovery's result recovers to itself
					l := open(t, d, Options{})
					require.Equal(t, want, readAll(t, l), "segment cut to %d of %d bytes", size, full.Size())
					end, err := l.EndOffset(tp)
					require.NoError(t, err)
					require.Equal(t, want[len(want)-1].LastOffset+1, end)
					require.NoError(t, l.Close())
				}
			}
		})
	}
}

// TestTruncateInsideCallSurvives: what a Truncate leaves of an Append's
// call, and an epoch assigned after it, survive restarts.
func TestTruncateInsideCallSurvives(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	require.NoError(t, err)
	call := []storage.Batch{batch(1, 0, 4), batch(1, 5, 9), batch(1, 10, 14)}
	require.NoError(t, l.Append(t.Context(), tp, call))
	require.NoError(t, l.Truncate(t.Context(), tp, 10))
	require.NoError(t, l.AssignEpoch(tp, 3))
	require.NoError(t, l.Truncate(t.Context(), tp, 20), "above the end: changes nothing")
	for range 2 {
		require.NoError(t, l.Close())
		l = open(t, dir, Options{})
		require.Equal(t, call[:2], readAll(t, l))
		epochs, err := l.Epochs(tp)
		require.NoError(t, err)
		require.Equal(t, []storage.EpochEntry{ep(1, 0), ep(3, 10)}, epochs)
	}
}

// TestInterruptedTruncate: a crash at each step of a Truncate that cuts
// a call in the first of two segments leaves the log as it was before the
// Truncate or as after it, and a log that recovers to itself.
func TestInterruptedTruncate(t *testing.T) {
	opts := Options{SegmentBytes: 200}
	dir := t.TempDir()
	l, err := Open(dir, opts)
	require.NoError(t, err)
	calls := [][]storage.Batch{{batch(1, 0, 4), batch(1, 5, 9), batch(2, 10, 14), batch(2, 15, 19)}, {batch(2, 20, 24), batch(3, 25, 29)}}
	for _, c := range calls {
		require.NoError(t, l.Append(t.Context(), tp, c))
	}
	segs := segmentFiles(t, l)
	require.Len(t, segs, 2)
	checkpoint := filepath.Join(dir, dirName(tp), checkpointName)
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return b
	}
	seg0, seg1, cpBefore := read(segs[0]), read(segs[1]), read(checkpoint)
	require.NoError(t, l.Truncate(t.Context(), tp, 10))
	require.NoError(t, l.Close())
	cpDone := read(checkpoint)
	// The checkpoint the Truncate wrote first: the same, but saying that
	// the truncation is under way.
	done, err := parseCheckpoint(checkpoint, cpDone)
	require.NoError(t, err)
	require.Equal(t, stateRecords, done.state)
	underWay := done
	underWay.state = stateTruncating
	cpUnderWay := underWay.encode()

	before, beforeEpochs := append(calls[0][:4:4], calls[1]...), []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 25)}
	after, afterEpochs := calls[0][:2], []storage.EpochEntry{ep(1, 0)}
	kept := seg0[:framesSize(calls[0][:2])]
	for _, c := range []struct {
		name       string
		checkpoint []byte
		seg0, seg1 []byte // nil: removed
		want       []storage.Batch
		epochs     []storage.EpochEntry
	}{
		{"before the first checkpoint", cpBefore, seg0, seg1, before, beforeEpochs},
		{"after the first checkpoint", cpUnderWay, seg0, seg1, after, afterEpochs},
		{"after the cut segment's truncation", cpUnderWay, kept, seg1, after, afterEpochs},
		{"before the second checkpoint", cpUnderWay, kept, nil, after, afterEpochs},
		{"done", cpDone, kept, nil, after, afterEpochs},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := copyDir(t, dir)
			pd := filepath.Join(d, dirName(tp))
			require.NoError(t, os.WriteFile(filepath.Join(pd, checkpointName), c.checkpoint, 0o644))
			for i, f := range [][]byte{c.seg0, c.seg1} {
				p := filepath.Join(pd, filepath.Base(segs[i]))
				if f == nil {
					require.NoError(t, os.RemoveAll(p))
				} else {
					require.NoError(t, os.WriteFile(p, f, 0o644))
				}
			}
			for range 2 {
				l := open(t, d, opts)
				require.Equal(t, c.want, readAll(t, l))
				epochs, err := l.Epochs(tp)
				require.NoError(t, err)
				require.Equal(t, c.epochs, epochs)
				require.NoError(t, l.Close())
			}
			// What the recovered log appends survives.
			l := open(t, d, opts)
			end := c.want[len(c.want)-1].LastOffset + 1
			next := batch(4, end, end+1)
			require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{next}))
			require.NoError(t, l.Close())
			l = open(t, d, opts)
			require.Equal(t, append(c.want[:len(c.want):len(c.want)], next), readAll(t, l))
		})
	}
}

// framesSize is the bytes batches' frames take.
func framesSize(batches []storage.Batch) int {
	n := 0
	for _, b := range batches {
		n += frameHeader + len(b.Data)
	}
	return n
}

// TestOldFormatRefused: a log of the format before Append calls were
// marked in their frames is an error, not damage to truncate.
func TestOldFormatRefused(t *testing.T) {
	dir := t.TempDir()
	pd := filepath.Join(dir, dirName(tp))
	require.NoError(t, os.MkdirAll(pd, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pd, checkpointName), []byte("0\n0\n0\n1\n1 0\n"), 0o644))
	_, err := Open(dir, Options{})
	require.ErrorIs(t, err, ErrFormat)
}

// FuzzOpen recovers a partition from arbitrary segment bytes after a
// valid prefix (calls of one and several batches, a Truncate inside a
// call), under each checkpoint state: Open never panics or fails on
// damage, what it keeps reads back without error, and the log it leaves
// recovers to itself and takes the next Append.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	l, err := Open(dir, Options{})
	require.NoError(f, err)
	require.NoError(f, l.Append(f.Context(), tp, []storage.Batch{batch(1, 0, 4)}))
	require.NoError(f, l.Append(f.Context(), tp, []storage.Batch{batch(1, 5, 9), batch(2, 10, 14), batch(2, 15, 19)}))
	require.NoError(f, l.Truncate(f.Context(), tp, 15))
	require.NoError(f, l.Append(f.Context(), tp, []storage.Batch{batch(3, 15, 16), batch(3, 17, 20)}))
	seg := segmentFiles(f, l)[0]
	require.NoError(f, l.Close())
	valid, err := os.ReadFile(seg)
	require.NoError(f, err)
	for _, n := range []int{0, 10, len(valid) / 2, len(valid) - 1, len(valid)} {
		f.Add(valid[:n], []byte{}, byte(0))
		f.Add(valid[:n], valid[n:], byte(2))
	}
	f.Add(valid, []byte{0, 0, 0, 40, 1, 2, 3}, byte(1))
	// The same under checkpoints of version 1 (bit 4 of state).
	for _, n := range []int{0, len(valid) / 2, len(valid)} {
		f.Add(valid[:n], []byte{}, byte(0x10))
		f.Add(valid[:n], valid[n:], byte(0x12))
		f.Add(valid[:n], []byte{}, byte(0x11))
	}
	f.Fuzz(func(t *testing.T, head, tail []byte, st byte) {
		d := t.TempDir()
		pd := filepath.Join(d, dirName(tp))
		require.NoError(t, os.MkdirAll(pd, 0o755))
		c := checkpoint{state: stateRecords + state(st%3), cut: []int64{-1, 15, 10, 0}[st>>2%4], entries: []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 15)}}
		if c.state == stateTruncating && c.cut < 0 {
			c.cut = 15 // a checkpoint says where a truncation under way goes
		}
		cp := c.encode()
		if st&0x10 != 0 {
			cp = v1Checkpoint(c)
		}
		require.NoError(t, os.WriteFile(filepath.Join(pd, checkpointName), cp, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(pd, filepath.Base(seg)), append(head[:len(head):len(head)], tail...), 0o644))

		l, err := Open(d, Options{Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		got, err := l.Read(t.Context(), tp, 0, 1<<30)
		require.NoError(t, err)
		end, err := l.EndOffset(tp)
		require.NoError(t, err)
		require.NoError(t, l.Close())

		l, err = Open(d, Options{Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		defer l.Close()
		again, err := l.Read(t.Context(), tp, 0, 1<<30)
		require.NoError(t, err)
		require.Equal(t, got, again, "recovery recovers to itself")
		require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{batch(9, end, end)}))
	})
}
