package fsstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/activetier/activetier/walstore"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{syscall.ENOENT, walstore.ErrNotFound},
		{syscall.ENOTDIR, walstore.ErrNotFound},
		{syscall.EEXIST, walstore.ErrAlreadyExists},
		{syscall.EIO, walstore.ErrUnavailable},
		{syscall.ESTALE, walstore.ErrUnavailable},
		{syscall.ETIMEDOUT, walstore.ErrUnavailable},
		{syscall.ENOSPC, walstore.ErrUnavailable},
		{syscall.EDQUOT, walstore.ErrUnavailable},
		{syscall.EINTR, walstore.ErrUnavailable},
		{syscall.EMFILE, walstore.ErrUnavailable},
		{syscall.EHOSTUNREACH, walstore.ErrUnavailable},
		{syscall.EACCES, nil},
		{syscall.EPERM, nil},
		{syscall.EROFS, nil},
		{syscall.EMLINK, nil},
		{syscall.ELOOP, nil},
		{syscall.ENAMETOOLONG, nil},
		{syscall.EXDEV, nil},
		{errors.New("something else"), nil},
		{fs.ErrNotExist, walstore.ErrNotFound},
	} {
		wrapped := &os.LinkError{Op: "link", Old: "a", New: "b", Err: tc.err}
		got := classify(fmt.Errorf("context: %w", wrapped))
		assert.Equal(t, tc.want, got, "%v", tc.err)
	}
}
