package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/activetier/activetier/storage"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{syscall.ENOENT, storage.ErrNotFound},
		{syscall.ENOTDIR, storage.ErrNotFound},
		{syscall.EEXIST, storage.ErrAlreadyExists},
		{syscall.EIO, storage.ErrUnavailable},
		{syscall.ESTALE, storage.ErrUnavailable},
		{syscall.ETIMEDOUT, storage.ErrUnavailable},
		{syscall.ENOSPC, storage.ErrUnavailable},
		{syscall.EDQUOT, storage.ErrUnavailable},
		{syscall.EINTR, storage.ErrUnavailable},
		{syscall.EMFILE, storage.ErrUnavailable},
		{syscall.EHOSTUNREACH, storage.ErrUnavailable},
		{syscall.EACCES, nil},
		{syscall.EPERM, nil},
		{syscall.EROFS, nil},
		{syscall.EMLINK, nil},
		{syscall.ELOOP, nil},
		{syscall.ENAMETOOLONG, nil},
		{syscall.EXDEV, nil},
		{errors.New("something else"), nil},
		{fs.ErrNotExist, storage.ErrNotFound},
	} {
		wrapped := &os.LinkError{Op: "link", Old: "a", New: "b", Err: tc.err}
		got := classify(fmt.Errorf("context: %w", wrapped))
		assert.Equal(t, tc.want, got, "%v", tc.err)
	}
}
