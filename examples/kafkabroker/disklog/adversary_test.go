package disklog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
)

// advCalls are the Append calls of the adversary's log: single and
// multi-frame calls over several segments (SegmentBytes 400).
var advCalls = [][]combiner.Batch{
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
func prefixes() [][]combiner.Batch {
	out := [][]combiner.Batch{nil}
	var acc []combiner.Batch
	for _, c := range advCalls {
		acc = append(acc[:len(acc):len(acc)], c...)
		out = append(out, acc)
	}
	return out
}

// recoverCopy opens a copy of dir damaged by damage and returns what it
// holds, or Open's error; it requires that what it holds recovers to
// itself and takes the next Append.
func recoverCopy(t *testing.T, dir string, damage func(pd string)) ([]combiner.Batch, error) {
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
	require.NoError(t, l.Append(t.Context(), tp, []combiner.Batch{batch(next, end, end)}))
	if len(got) == 0 {
		return nil, nil
	}
	return got, nil
}

// requirePrefix requires got to be one of the logs whole calls make.
func requirePrefix(t *testing.T, got []combiner.Batch, msg string) int {
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

func describeBatches(bs []combiner.Batch) string {
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

// A flipped bit at every byte of the checkpoint: Open refuses it with
// ErrFormat, or recovers the whole log (the frames are the truth), never
// part of a call and never an untyped error.
func TestAdversaryFlippedCheckpointByte(t *testing.T) {
	dir := advLog(t)
	cp, err := os.ReadFile(filepath.Join(dir, dirName(tp), checkpointName))
	require.NoError(t, err)
	t.Logf("checkpoint %q", cp)
	for at := range int64(len(cp)) {
		got, err := recoverCopy(t, dir, func(pd string) { flip(t, filepath.Join(pd, checkpointName), at) })
		if err != nil {
			require.ErrorIs(t, err, ErrFormat, "byte %d flipped", at)
			continue
		}
		n := requirePrefix(t, got, fmt.Sprintf("checkpoint byte %d flipped", at))
		require.Equal(t, len(prefixes())-1, n, "checkpoint byte %d (%q) flipped: %d acknowledged calls of %d dropped", at, cp[at], len(prefixes())-1-n, len(prefixes())-1)
	}
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
			got, err := recoverCopy(t, dir, func(pd string) {
				require.NoError(t, os.WriteFile(filepath.Join(pd, checkpointName), []byte(c.cp), 0o644))
			})
			if err != nil {
				require.True(t, errors.Is(err, ErrFormat), "untyped error: %v", err)
				return
			}
			require.Equal(t, len(prefixes())-1, requirePrefix(t, got, c.name), "acknowledged records dropped")
		})
	}
}
