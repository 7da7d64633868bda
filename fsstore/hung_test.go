//go:build unix

package fsstore_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/storage"
)

// A file server that stops answering blocks the kernel, not the caller:
// the call returns when its context ends, and the calls still in the
// kernel are bounded by MaxPending per bucket. A FIFO stands in for the
// hung server: opening it blocks in open(2) until a writer opens it.
func TestHungFileServer(t *testing.T) {
	opts := twoAZs(t, "az1")
	opts.MaxPending = 1
	s := newStore(t, opts)
	peer := newStore(t, peerOf(opts, "az2"))
	real, err := s.Put(t.Context(), "real", []byte("real"))
	require.NoError(t, err)
	elsewhere, err := peer.Put(t.Context(), "elsewhere", []byte("other AZ"))
	require.NoError(t, err)
	fifo := filepath.Join(opts.Buckets["az1"].Dir, "hung")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	deadline := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	dst := []byte("untouched")
	n, err := s.ReadRange(deadline(), ref(s, "hung"), 0, dst)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, storage.ErrUnavailable, "the caller's deadline is not the store's failure")
	assert.Zero(t, n)

	// The bucket's one slot is held by the call still in open(2).
	_, err = s.GetRange(deadline(), real, 0, 4)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "all 1 calls allowed on bucket bucket-az1 were still in progress")
	_, err = s.Put(deadline(), "new", []byte("x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = s.List(deadline(), real.Bucket, "")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Other buckets have slots of their own.
	got, err := s.GetRange(deadline(), elsewhere, 0, 8)
	require.NoError(t, err)
	assert.Equal(t, "other AZ", string(got))

	// The server answers: the stuck open returns, finds no object, and
	// frees the slot.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	got, err = s.GetRange(t.Context(), real, 0, 4)
	require.NoError(t, err)
	assert.Equal(t, "real", string(got))
	// The read ReadRange gave up on has ended (it held the one slot):
	// it left dst alone.
	assert.Equal(t, "untouched", string(dst))
	infos, err := s.List(t.Context(), real.Bucket, "")
	require.NoError(t, err)
	require.Len(t, infos, 1, "a FIFO is not an object")
	assert.Equal(t, real, infos[0].Ref)
}
