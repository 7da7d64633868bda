package disklog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/storage"
)

// advCalls are the Append calls of the adversary's log: single and
// multi-frame calls over several segments (SegmentBytes 400).
var advCalls = [][]storage.Batch{
	{batch(1, 0, 4)},
	{batch(1, 5, 9), batch(2, 10, 14), batch(2, 15, 19)},
	{batch(2, 20, 20)},
	{batch(3, 21, 25), batch(3, 26, 30), batch(4, 31, 31), batch(4, 32, 40)},
}

const advSegmentBytes = 400

// advLog writes advCalls to a new log and returns its directory.
func advLog(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentBytes: advSegmentBytes})
	require.NoError(t, err)
	for _, c := range advCalls {
		require.NoError(t, l.Append(t.Context(), tp, c))
	}
	require.NoError(t, l.Close())
	return dir
}

// prefixes returns the logs that whole calls of advCalls make: the only
// logs recovery may leave.
func prefixes() [][]storage.Batch {
	out := [][]storage.Batch{nil}
	var acc []storage.Batch
	for _, c := range advCalls {
		acc = append(acc[:len(acc):len(acc)], c...)
		out = append(out, acc)
	}
	return out
}

// recoverCopy opens a copy of dir damaged by damage and returns what it
// holds, or Open's error; it requires that what it holds recovers to
// itself and takes the next Append.
func recoverCopy(t *testing.T, dir string, damage func(pd string)) ([]storage.Batch, error) {
	t.Helper()
	d := copyDir(t, dir)
	damage(filepath.Join(d, dirName(tp)))
	quiet := slog.New(slog.DiscardHandler)
	l, err := Open(d, Options{SegmentBytes: advSegmentBytes, Logger: quiet})
	if err != nil {
		return nil, err
	}
	got, err := l.Read(t.Context(), tp, 0, 1<<30)
	require.NoError(t, err)
	end, err := l.EndOffset(tp)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = Open(d, Options{SegmentBytes: advSegmentBytes, Logger: quiet})
	require.NoError(t, err)
	defer l.Close()
	again, err := l.Read(t.Context(), tp, 0, 1<<30)
	require.NoError(t, err)
	require.Equal(t, got, again, "recovery recovers to itself")
	epochs, err := l.Epochs(tp)
	require.NoError(t, err)
	next := int32(9)
	if n := len(epochs); n > 0 {
		next = max(next, epochs[n-1].Epoch)
	}
	require.NoError(t, l.Append(t.Context(), tp, []storage.Batch{batch(next, end, end)}))
	if len(got) == 0 {
		return nil, nil
	}
	return got, nil
}

// requirePrefix requires got to be one of the logs whole calls make.
func requirePrefix(t *testing.T, got []storage.Batch, msg string) int {
	t.Helper()
	for i, p := range prefixes() {
		if len(p) == len(got) && (len(p) == 0 || fmt.Sprint(p) == fmt.Sprint(got)) {
			require.Equal(t, p, got)
			return i
		}
	}
	require.Failf(t, "recovery kept part of a call, or wrong bytes", "%s: %d batches: %s", msg, len(got), describeBatches(got))
	return -1
}

func describeBatches(bs []storage.Batch) string {
	s := ""
	for _, b := range bs {
		s += fmt.Sprintf("[%d %d-%d] ", b.Epoch, b.FirstOffset, b.LastOffset)
	}
	return s
}

// segments returns the segment paths of pd, oldest first.
func segments(t *testing.T, pd string) []string {
	m, err := filepath.Glob(filepath.Join(pd, "*"+segmentSuffix))
	require.NoError(t, err)
	return m
}

// Every length a crash could leave the last segment at (each byte from
// empty to whole), and the last segment removed: recovery keeps whole
// calls only, all of the last or none of it, and never an earlier call's
// part.
func TestAdversaryTornAtEveryLength(t *testing.T) {
	dir := advLog(t)
	segs := segments(t, filepath.Join(dir, dirName(tp)))
	require.Greater(t, len(segs), 1, "the log spans segments")
	last := filepath.Base(segs[len(segs)-1])
	st, err := os.Stat(segs[len(segs)-1])
	require.NoError(t, err)
	all := len(prefixes()) - 1
	var base int64
	_, err = fmt.Sscanf(last, "%d", &base)
	require.NoError(t, err)
	before := 0 // the calls wholly in earlier segments
	for _, c := range advCalls {
		if c[0].FirstOffset < base {
			before++
		}
	}
	for size := int64(0); size <= st.Size(); size++ {
		got, err := recoverCopy(t, dir, func(pd string) { require.NoError(t, os.Truncate(filepath.Join(pd, last), size)) })
		require.NoError(t, err)
		n := requirePrefix(t, got, fmt.Sprintf("last segment cut to %d of %d", size, st.Size()))
		if size == st.Size() {
			require.Equal(t, all, n)
		} else {
			require.GreaterOrEqual(t, n, before, "cut to %d: a call of an earlier segment was lost", size)
		}
	}
	got, err := recoverCopy(t, dir, func(pd string) { require.NoError(t, os.Remove(filepath.Join(pd, last))) })
	require.NoError(t, err)
	requirePrefix(t, got, "last segment removed")
}

// A flipped bit at every byte of every segment: recovery keeps whole
// calls only (a prefix of them, up to the damage), never a damaged
// batch nor part of a call.
func TestAdversaryFlippedSegmentByte(t *testing.T) {
	dir := advLog(t)
	for _, seg := range segments(t, filepath.Join(dir, dirName(tp))) {
		st, err := os.Stat(seg)
		require.NoError(t, err)
		name := filepath.Base(seg)
		for at := range st.Size() {
			got, err := recoverCopy(t, dir, func(pd string) { flip(t, filepath.Join(pd, name), at) })
			require.NoError(t, err)
			requirePrefix(t, got, fmt.Sprintf("%s: byte %d flipped", name, at))
		}
	}
}

// Every bit of every byte of the checkpoint flipped, alone, in a log with
// records and in one a Truncate(0) left empty: Open refuses it with
// ErrFormat, or recovers the whole log (the frames are the truth), never
// fewer batches without an error and never an untyped error. Without the
// checksum, flipping bit 0 of the state digit turned "records" into
// "empty" and Open wiped the log.
func TestAdversaryFlippedCheckpointBit(t *testing.T) {
	full := advLog(t)
	// A log whose Truncate(0) was killed after its checkpoint and before
	// it removed the segments: the state flipped the other way.
	emptied := copyDir(t, full)
	l, err := Open(emptied, Options{SegmentBytes: advSegmentBytes})
	require.NoError(t, err)
	require.NoError(t, l.Truncate(t.Context(), tp, 0))
	require.NoError(t, l.Close())
	cpEmpty, err := os.ReadFile(filepath.Join(emptied, dirName(tp), checkpointName))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(emptied))
	require.NoError(t, os.CopyFS(emptied, os.DirFS(full)))
	require.NoError(t, os.WriteFile(filepath.Join(emptied, dirName(tp), checkpointName), cpEmpty, 0o644))

	for _, c := range []struct {
		name string
		dir  string
		want int // calls of advCalls the log holds
	}{
		{"records", full, len(advCalls)},
		{"emptied", emptied, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp, err := os.ReadFile(filepath.Join(c.dir, dirName(tp), checkpointName))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(cp), checkpointVersion+"\n"), "checkpoint %q", cp)
			t.Logf("checkpoint %q", cp)
			got, err := recoverCopy(t, c.dir, func(string) {})
			require.NoError(t, err)
			require.Equal(t, c.want, requirePrefix(t, got, "undamaged"))
			refused := 0
			for at := range int64(len(cp)) {
				for bit := range 8 {
					what := fmt.Sprintf("byte %d (%q) bit %d flipped", at, cp[at], bit)
					got, err := recoverCopy(t, c.dir, func(pd string) { flipBits(t, filepath.Join(pd, checkpointName), at, 1<<bit) })
					if err != nil {
						require.ErrorIs(t, err, ErrFormat, what)
						refused++
						continue
					}
					require.Equal(t, c.want, requirePrefix(t, got, what), "%s: the log changed without an error", what)
				}
			}
			t.Logf("%d of %d flips refused with ErrFormat", refused, 8*len(cp))
		})
	}
}

// v1Checkpoint returns c as this package wrote it in checkpoint format
// version 1, byte for byte: the lines of version 2 without the checksum.
func v1Checkpoint(c checkpoint) []byte {
	b := fmt.Appendf(nil, "1\n%d\n%d\n%d\n%d\n", c.start, c.state, c.cut, len(c.entries))
	for _, e := range c.entries {
		b = fmt.Appendf(b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b
}

// A log whose checkpoint is of version 1 opens as it was (its records,
// its epochs, an epoch assigned before any record of it, an empty log's
// start), and Open rewrites the checkpoint as version 2.
func TestCheckpointV1Upgrade(t *testing.T) {
	withRecords := advLog(t)
	l, err := Open(withRecords, Options{SegmentBytes: advSegmentBytes})
	require.NoError(t, err)
	require.NoError(t, l.AssignEpoch(tp, 7)) // kept only by the checkpoint
	require.NoError(t, l.Close())
	emptyAt := func(offset int64) string {
		d := copyDir(t, withRecords)
		l, err := Open(d, Options{SegmentBytes: advSegmentBytes})
		require.NoError(t, err)
		require.NoError(t, l.Truncate(t.Context(), tp, offset))
		require.NoError(t, l.Close())
		return d
	}

	for _, c := range []struct {
		name   string
		dir    string
		frames bool // the frames of a Truncate killed before it removed them
	}{
		{"records", withRecords, false},
		{"empty from 50", emptyAt(50), false},
		{"empty, frames left", emptyAt(0), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := copyDir(t, c.dir)
			pd := filepath.Join(d, dirName(tp))
			path := filepath.Join(pd, checkpointName)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			v2, err := parseCheckpoint(path, data)
			require.NoError(t, err)
			require.Equal(t, checkpointVersion, v2.version)
			if c.frames {
				for _, seg := range segments(t, filepath.Join(withRecords, dirName(tp))) {
					b, err := os.ReadFile(seg)
					require.NoError(t, err)
					require.NoError(t, os.WriteFile(filepath.Join(pd, filepath.Base(seg)), b, 0o644))
				}
			}
			v1 := v1Checkpoint(v2)
			require.Equal(t, v2.appendLines(nil, checkpointVersionV1), v1, "the helper writes what version 1 wrote")
			require.NoError(t, os.WriteFile(path, v1, 0o644))
			parsed, err := parseCheckpoint(path, v1)
			require.NoError(t, err)
			require.Equal(t, checkpointVersionV1, parsed.version)

			want := open(t, c.dir, Options{SegmentBytes: advSegmentBytes})
			wantBatches, wantEpochs := readAll(t, want), epochsOf(t, want)
			wantStart, err := want.StartOffset(tp)
			require.NoError(t, err)
			require.NoError(t, want.Close())

			for range 2 {
				l := open(t, d, Options{SegmentBytes: advSegmentBytes})
				require.Equal(t, wantBatches, readAll(t, l))
				require.Equal(t, wantEpochs, epochsOf(t, l))
				start, err := l.StartOffset(tp)
				require.NoError(t, err)
				require.Equal(t, wantStart, start)
				require.NoError(t, l.Close())
				upgraded, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, v2.encode(), upgraded, "Open rewrites a version 1 checkpoint as version 2")
			}
		})
	}
}

func epochsOf(t *testing.T, l *Log) []storage.EpochEntry {
	t.Helper()
	e, err := l.Epochs(tp)
	require.NoError(t, err)
	return e
}

// FuzzCheckpoint: any bytes as a checkpoint are refused with ErrFormat or
// parse; a version 2 one that parses is exactly what encode writes for
// what it says, so no damaged one is taken at its word.
func FuzzCheckpoint(f *testing.F) {
	c := checkpoint{start: 0, state: stateRecords, cut: 20, entries: []storage.EpochEntry{ep(1, 0), ep(2, 10), ep(3, 21), ep(4, 31)}}
	for _, st := range []state{stateRecords, stateEmpty, stateTruncating} {
		c.state = st
		f.Add(c.encode())
		f.Add(v1Checkpoint(c))
	}
	f.Add(checkpoint{cut: -1}.encode())
	f.Add([]byte("0\n0\n0\n1\n1 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseCheckpoint("checkpoint", data)
		if err != nil {
			require.ErrorIs(t, err, ErrFormat)
			return
		}
		if c.version == checkpointVersion {
			require.Equal(t, data, c.encode())
		}
	})
}

// Checkpoints that name more than the files hold, or claim what the
// frames contradict: Open refuses them with ErrFormat or keeps every
// frame; it never drops acknowledged records for them.
func TestAdversaryCheckpointClaimsMore(t *testing.T) {
	dir := advLog(t)
	for _, c := range []struct{ name, cp string }{
		{"cut past the end", "1\n0\n0\n500\n4\n1 0\n2 10\n3 21\n4 31\n"},
		{"truncating past the end", "1\n0\n2\n500\n4\n1 0\n2 10\n3 21\n4 31\n"},
		{"epoch past the end", "1\n0\n0\n-1\n5\n1 0\n2 10\n3 21\n4 31\n5 900\n"},
		{"start past the frames", "1\n7\n0\n-1\n4\n1 0\n2 10\n3 21\n4 31\n"},
		{"start past the end", "1\n900\n0\n-1\n0\n"},
		{"empty, start past the frames", "1\n7\n1\n-1\n0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v1, err := parseCheckpoint("claims", []byte(c.cp))
			require.NoError(t, err)
			for _, cp := range [][]byte{[]byte(c.cp), v1.encode()} {
				got, err := recoverCopy(t, dir, func(pd string) {
					require.NoError(t, os.WriteFile(filepath.Join(pd, checkpointName), cp, 0o644))
				})
				if err != nil {
					require.True(t, errors.Is(err, ErrFormat), "untyped error: %v", err)
					continue
				}
				require.Equal(t, len(prefixes())-1, requirePrefix(t, got, c.name), "acknowledged records dropped")
			}
		})
	}
}
