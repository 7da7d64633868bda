package fsstore

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/activetier/activetier/internal/storeutil"
	"github.com/activetier/activetier/storage"
)

// ErrInvalidKey is returned, before any file is touched, for a key no
// object can have: empty, longer than 1024 bytes, not valid UTF-8, with a
// NUL byte, with an empty, "." or ".." path segment (a leading, trailing or
// doubled "/" included), or with a segment too long for a file name. Put
// and Delete return it; GetRange returns it as storage.ErrNotFound too,
// since no such object can exist.
var ErrInvalidKey = errors.New("fsstore: invalid object key")

// Error is the error every Store method returns for a failed operation. It
// names the operation and the object, matches the walstore sentinel it was
// classified as (Kind) under errors.Is, and keeps the underlying error
// (Err), so that errors.As still finds the *fs.PathError or *os.LinkError
// with the file's path and the syscall.Errno.
type Error struct {
	// Op is the Store method: "Put", "GetRange", "ReadRange", "Delete" or
	// "List".
	Op string
	// Bucket and Key name the object as the caller did; Key is the listed
	// prefix for List.
	Bucket, Key string
	// Kind is the sentinel the error matches (storage.ErrNotFound,
	// ErrAlreadyExists, ErrUnavailable, ErrInvalidRange, ErrUnknownBucket,
	// or ErrInvalidKey), or nil for errors that need an operator
	// (permissions, a read-only file system, a file system without hard
	// links).
	Kind error
	// Err is the underlying error.
	Err error
}

// Error formats the error as "fsstore: Op bucket/key: kind: cause".
func (e *Error) Error() string {
	return storeutil.ErrorText("fsstore", e.Op, e.Bucket, e.Key, e.Kind, e.Err)
}

// Unwrap returns Kind and Err, so errors.Is and errors.As see both.
func (e *Error) Unwrap() []error { return storeutil.KindAndCause(e.Kind, e.Err) }

// classify maps an error of a file system call to the walstore sentinel
// it means, or nil when an operator must act. This is the one place the
// mapping lives; doc.go has it as a table.
func classify(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return storage.ErrNotFound
		case errors.Is(err, fs.ErrExist):
			return storage.ErrAlreadyExists
		}
		return nil
	}
	switch errno {
	case syscall.ENOENT, syscall.ENOTDIR:
		// ENOTDIR: a path component is a file, so nothing is below it.
		return storage.ErrNotFound
	case syscall.EEXIST:
		return storage.ErrAlreadyExists
	}
	if transient(errno) {
		return storage.ErrUnavailable
	}
	return nil
}

// transient reports whether a call failing with errno may succeed later
// without an operator: the disk or the file server failed this once or is
// unreachable (EIO, ESTALE, ETIMEDOUT and the network errors of NFS), a
// resource is exhausted and may be freed (ENOSPC and EDQUOT as garbage
// collection deletes objects, EMFILE, ENFILE, ENOMEM), or the call was
// interrupted (EINTR, EAGAIN).
func transient(errno syscall.Errno) bool {
	switch errno {
	case syscall.EIO, syscall.ESTALE, syscall.ETIMEDOUT, syscall.EAGAIN, syscall.EINTR, syscall.EBUSY,
		syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENOLCK,
		syscall.ENETDOWN, syscall.ENETUNREACH, syscall.ENETRESET, syscall.EHOSTDOWN, syscall.EHOSTUNREACH,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED:
		return true
	}
	return false
}
