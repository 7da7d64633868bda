package fsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Defaults for Options fields left zero.
const (
	// DefaultTempMaxAge is how old a temporary file must be before List
	// removes it as a crashed writer's leftover.
	DefaultTempMaxAge = 15 * time.Minute
	// DefaultMaxPending bounds the calls in progress per bucket.
	DefaultMaxPending = 128
)

// minTempMaxAge keeps a slow Put's temporary file from being taken for a
// leftover: no Put writes for this long.
const minTempMaxAge = time.Minute

// Bucket is one AZ's bucket: the name object references carry and the
// directory that holds its objects.
type Bucket struct {
	// Name is the bucket's name in object references and metadata
	// entries. It must be the same on every broker of a deployment,
	// wherever each mounts the directory. Empty means the AZ's name.
	Name string
	// Dir is the bucket's directory on this broker: a local path, or one
	// on an NFS, EFS or FSx mount. It must exist. A relative path is
	// resolved when New is called.
	Dir string
}

// Options configures a Store. Buckets and LocalAZ are required.
type Options struct {
	// Buckets maps each AZ of the deployment to its bucket. Every broker
	// of a deployment must configure the same AZs and bucket names.
	Buckets map[string]Bucket
	// LocalAZ is this broker's AZ: Put writes to Buckets[LocalAZ].
	LocalAZ string
	// TempMaxAge is how old a temporary file must be (by its modification
	// time) before List removes it as the leftover of a writer that
	// crashed. It must exceed the longest a Put may take to write and
	// sync its body. Zero means DefaultTempMaxAge; at least a minute.
	TempMaxAge time.Duration
	// MaxPending bounds the calls in progress per bucket, including
	// those whose caller's context ended while the kernel had not yet
	// returned (see the package documentation, Contexts). Zero means
	// DefaultMaxPending.
	MaxPending int
}

// bucket is one configured bucket.
type bucket struct {
	name, az, dir string
	// slots holds a token per call in progress on the bucket.
	slots chan struct{}
}

// Store is a storage.ObjectStore on a POSIX file system, one directory
// per AZ. It is safe for concurrent use, by goroutines and by processes on
// any host that mounts the same directories.
type Store struct {
	local      metadata.ObjectRef
	buckets    map[string]*bucket // by name
	tempMaxAge time.Duration
	staging    sync.Pool // *[]byte of stagingBytes, for ReadRange
}

var (
	_ storage.ObjectStore = (*Store)(nil)
	_ storage.RangeReader = (*Store)(nil)
)

// New validates opts and returns a Store. Every bucket directory must
// exist and be a directory, no two may be the same or nested, and the
// local one must support hard links: New links a probe file there and
// removes it, so that a file system without them (SMB, some FUSE file
// systems) is refused now rather than on the first Put.
func New(opts Options) (*Store, error) {
	if len(opts.Buckets) == 0 {
		return nil, errors.New("fsstore: Options.Buckets is empty; map each AZ to its bucket directory")
	}
	if opts.TempMaxAge != 0 && opts.TempMaxAge < minTempMaxAge {
		return nil, fmt.Errorf("fsstore: Options.TempMaxAge %v is below %v; a slow Put's temporary file could be removed while it writes", opts.TempMaxAge, minTempMaxAge)
	}
	if opts.MaxPending < 0 {
		return nil, fmt.Errorf("fsstore: Options.MaxPending %d is negative", opts.MaxPending)
	}
	s := &Store{
		buckets:    make(map[string]*bucket, len(opts.Buckets)),
		tempMaxAge: orDefault(opts.TempMaxAge, DefaultTempMaxAge),
	}
	s.staging.New = func() any { b := make([]byte, stagingBytes); return &b }
	maxPending := orDefault(opts.MaxPending, DefaultMaxPending)
	var dirs []*bucket
	for _, az := range slices.Sorted(maps.Keys(opts.Buckets)) {
		cfg := opts.Buckets[az]
		if az == "" || strings.TrimSpace(az) != az {
			return nil, fmt.Errorf("fsstore: Options.Buckets: AZ %q must be non-empty without surrounding space", az)
		}
		name := orDefault(cfg.Name, az)
		if strings.TrimSpace(name) != name {
			return nil, fmt.Errorf("fsstore: Options.Buckets[%q]: bucket name %q has surrounding space", az, name)
		}
		if other, dup := s.buckets[name]; dup {
			return nil, fmt.Errorf("fsstore: Options.Buckets: bucket name %q is used by both %q and %q; each AZ needs its own", name, other.az, az)
		}
		dir, err := checkDir(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("fsstore: Options.Buckets[%q]: %w", az, err)
		}
		for _, other := range dirs {
			if within(dir, other.dir) || within(other.dir, dir) {
				return nil, fmt.Errorf("fsstore: Options.Buckets: the directories of %q (%s) and %q (%s) overlap; each AZ needs its own", other.az, other.dir, az, dir)
			}
		}
		b := &bucket{name: name, az: az, dir: dir, slots: make(chan struct{}, maxPending)}
		s.buckets[name] = b
		dirs = append(dirs, b)
	}
	local, ok := opts.Buckets[opts.LocalAZ]
	if !ok {
		return nil, fmt.Errorf("fsstore: Options.LocalAZ %q is not a key of Options.Buckets (%s)", opts.LocalAZ, strings.Join(slices.Sorted(maps.Keys(opts.Buckets)), ", "))
	}
	s.local = metadata.ObjectRef{AZ: opts.LocalAZ, Bucket: orDefault(local.Name, opts.LocalAZ)}
	if err := probeLinks(s.buckets[s.local.Bucket].dir); err != nil {
		return nil, fmt.Errorf("fsstore: Options.Buckets[%q]: the local bucket's directory cannot take objects: %w", opts.LocalAZ, err)
	}
	return s, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkDir resolves a bucket directory to an absolute path without
// symbolic links and checks that it is a directory.
func checkDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("Dir is empty")
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return abs, nil
}

// within reports whether path is dir or below it; both are clean and
// absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// probeLinks checks that dir takes a file and a hard link to it, as Put
// needs, and removes both.
func probeLinks(dir string) error {
	tmp, f, err := createTemp(dir)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := f.Close(); err != nil {
		return err
	}
	link := tmp + "-link"
	if err := os.Link(tmp, link); err != nil {
		return fmt.Errorf("the file system does not support hard links, which Put publishes objects with: %w", err)
	}
	return os.Remove(link)
}

// Local returns the AZ and bucket Put writes to.
func (s *Store) Local() metadata.ObjectRef { return s.local }

// Put stores body under key in the local bucket unless the key is taken,
// then storage.ErrAlreadyExists. It writes body to a temporary file in
// the key's directory, syncs it, and publishes it with link(2), which
// fails if the key exists; then it removes the temporary name and syncs
// the directory. Readers see the whole object or none. Put does not
// return before the kernel does, so that it never holds body after
// returning: a hung file server holds it up (see Contexts in the package
// documentation).
func (s *Store) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	const op = "Put"
	ref := s.local
	ref.Key = key
	rel, err := encodeKey(key)
	if err != nil {
		return metadata.ObjectRef{}, &Error{Op: op, Bucket: ref.Bucket, Key: key, Kind: ErrInvalidKey, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return metadata.ObjectRef{}, &Error{Op: op, Bucket: ref.Bucket, Key: key, Err: err}
	}
	b := s.buckets[ref.Bucket]
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return metadata.ObjectRef{}, b.busy(op, key, ctx.Err())
	}
	defer func() { <-b.slots }()
	if err := b.put(ctx, filepath.Join(b.dir, filepath.FromSlash(rel)), body); err != nil {
		return metadata.ObjectRef{}, b.opError(ctx, op, key, err)
	}
	return ref, nil
}

// put writes body to a temporary file beside path and links it to path.
func (b *bucket) put(ctx context.Context, path string, body []byte) error {
	dir := filepath.Dir(path)
	tmp, f, err := createTemp(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// The key's first object in this directory.
		if err = b.mkdirs(dir); err == nil {
			tmp, f, err = createTemp(dir)
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		// Unlinking the temporary name leaves a published object in
		// place. If the unlink fails, List removes the file later.
		_ = os.Remove(tmp)
	}()
	_, err = f.Write(body)
	if err == nil {
		// The data must be on stable storage before the name is: a crash
		// after link must not leave a published object with lost blocks.
		err = f.Sync()
	}
	// Close reports errors of writes NFS deferred to it.
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// Not published: the caller gave up, and is told nothing landed.
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		// A link whose reply was lost (an NFS retransmission, a soft
		// mount's timeout) may have been made all the same: then path is
		// our own file, and the retried link's EEXIST is our success.
		switch {
		case sameFile(tmp, path):
		case errors.Is(err, fs.ErrNotExist) && !exists(tmp):
			return &kindError{kind: storage.ErrUnavailable, err: fmt.Errorf("the temporary file was removed before it was published (a List took it for a crashed writer's: is Options.TempMaxAge shorter than this Put took?): %w", err)}
		default:
			return err
		}
	}
	return syncDir(dir)
}

// createTemp creates a new temporary file in dir, with a name List never
// returns and a mode the umask limits as for any new file.
func createTemp(dir string) (string, *os.File, error) {
	for {
		var r [8]byte
		_, _ = rand.Read(r[:])
		name := filepath.Join(dir, tempPrefix+hex.EncodeToString(r[:]))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue // a 64-bit collision: draw again
		}
		return name, f, err
	}
}

// exists reports whether a file is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// sameFile reports whether a and b are names of one file.
func sameFile(a, b string) bool {
	fa, errA := os.Lstat(a)
	fb, errB := os.Lstat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// mkdirs creates dir and its missing parents below the bucket directory,
// syncing each new directory's parent so that the new entry survives a
// crash. A directory made by a concurrent Put is as good as one's own.
func (b *bucket) mkdirs(dir string) error {
	if dir == b.dir {
		return nil
	}
	err := os.Mkdir(dir, 0o777)
	if errors.Is(err, fs.ErrNotExist) {
		if err := b.mkdirs(filepath.Dir(dir)); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o777)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// syncDir makes dir's entries durable. File systems that cannot sync a
// directory (EINVAL) make their directory operations durable themselves
// or not at all; NFS commits them before answering.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		err = nil
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// GetRange reads bytes [offset, offset+length) of the object ref names
// with one pread, after checking the range's arguments, that ref's bucket
// is configured and that its key is valid. A range not wholly inside the
// object is storage.ErrInvalidRange; the result is exactly length bytes
// or an error.
func (s *Store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	const op = "GetRange"
	b, path, err := s.object(op, ref, offset, length)
	if err != nil {
		return nil, err
	}
	var buf []byte
	err = b.run(ctx, func() error {
		// Only buf, and only on success: the caller reads it after run
		// returned nil, when this function has returned.
		data, err := readRange(path, offset, length)
		if err == nil {
			buf = data
		}
		return err
	})
	if err != nil {
		return nil, b.opError(ctx, op, ref.Key, err)
	}
	return buf, nil
}

// ReadRange is GetRange into dst, as storage.RangeReader says, with the
// same checks and errors; it returns len(dst), or 0 with an error. A read
// runs on a goroutine of its own when ctx can end (see run), and a file
// server that stops answering may keep it in the kernel after ReadRange
// has returned: so it preads into a staging chunk of the store's, and
// copies each chunk into dst only while ReadRange waits for it. Once
// ReadRange gives up, a read still under way neither writes to dst nor
// reads further.
func (s *Store) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	const op = "ReadRange"
	b, path, err := s.object(op, ref, offset, int64(len(dst)))
	if err != nil {
		return 0, err
	}
	h := &handoff{dst: dst}
	err = b.run(ctx, func() error { return s.readInto(path, offset, h) })
	if err != nil {
		h.abandon()
		return 0, b.opError(ctx, op, ref.Key, err)
	}
	return len(dst), nil
}

// object checks a range's arguments, that ref's bucket is configured and
// that its key can name a file, and returns the bucket and the file's
// path.
func (s *Store) object(op string, ref metadata.ObjectRef, offset, length int64) (*bucket, string, error) {
	if length <= 0 || offset < 0 || offset > math.MaxInt64-length {
		return nil, "", &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrInvalidRange,
			Err: fmt.Errorf("offset %d, length %d: want offset >= 0, length > 0 and no overflow", offset, length)}
	}
	b, err := s.bucketOf(op, ref)
	if err != nil {
		return nil, "", err
	}
	rel, err := encodeKey(ref.Key)
	if err != nil {
		// No object can have this key: a reference that names one is
		// as good as one to a deleted object.
		return nil, "", &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrNotFound, Err: errors.Join(ErrInvalidKey, err)}
	}
	return b, filepath.Join(b.dir, filepath.FromSlash(rel)), nil
}

// readRange reads exactly length bytes at offset of the file at path.
func readRange(path string, offset, length int64) ([]byte, error) {
	f, err := openRange(path, offset, length)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, length)
	n, err := f.ReadAt(buf, offset)
	if int64(n) == length {
		return buf, nil
	}
	return nil, shortRead(n, length, offset, err)
}

// stagingBytes is the size of ReadRange's staging chunks: large enough
// for few preads, small enough to stay in cache until copied.
const stagingBytes = 128 << 10

// readInto reads len(h.dst) bytes at offset of the file at path into
// h.dst, a staging chunk at a time, until h is abandoned.
func (s *Store) readInto(path string, offset int64, h *handoff) error {
	length := int64(len(h.dst))
	f, err := openRange(path, offset, length)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := s.staging.Get().(*[]byte)
	defer s.staging.Put(chunk)
	for done := 0; done < len(h.dst); {
		want := min(len(h.dst)-done, len(*chunk))
		n, err := f.ReadAt((*chunk)[:want], offset+int64(done))
		if n < want {
			return shortRead(done+n, length, offset, err)
		}
		if !h.deliver(done, (*chunk)[:n]) {
			return errAbandoned
		}
		done += n
	}
	return nil
}

// errAbandoned ends a read whose caller returned: nobody sees it.
var errAbandoned = errors.New("fsstore: read abandoned")

// handoff is a ReadRange's buffer, written by its read until the caller
// abandons it.
type handoff struct {
	mu        sync.Mutex
	dst       []byte
	abandoned bool
}

// deliver copies chunk into dst at off, and reports false, copying
// nothing, once the caller has abandoned the read.
func (h *handoff) deliver(off int, chunk []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.abandoned {
		return false
	}
	copy(h.dst[off:], chunk)
	return true
}

// abandon stops all later writes to dst; one under way finishes first.
func (h *handoff) abandon() {
	h.mu.Lock()
	h.abandoned = true
	h.mu.Unlock()
}

// openRange opens the file at path for a read of length bytes at offset,
// after checking that it is an object holding the range.
func openRange(path string, offset, length int64) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = &kindError{kind: storage.ErrNotFound, err: fmt.Errorf("%s is a %v, not an object", path, fi.Mode().Type())}
	case offset+length > fi.Size():
		err = &kindError{kind: storage.ErrInvalidRange, err: fmt.Errorf("object is %d bytes, range ends at %d", fi.Size(), offset+length)}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// shortRead is the error of a read of length bytes at offset that got n,
// and err from the file.
func shortRead(n int, length, offset int64, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		// Objects never change once linked: a file that shrank was
		// changed by something else, or the read was cut short. Either
		// may read whole on another try.
		return &kindError{kind: storage.ErrUnavailable, err: fmt.Errorf("read %d of %d bytes at %d: the file ended early", n, length, offset)}
	}
	return err
}

// kindError is a failure the store found itself (a file that does not
// hold the range, a bucket directory gone), and the walstore sentinel it
// means.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// Delete removes the objects refs name, from any configured bucket, and
// syncs each directory it removed from. Every ref is checked before any
// file is removed. Missing objects are not errors. A failure to remove
// one object does not stop the others; at most ten failures are reported
// by name.
func (s *Store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	const op = "Delete"
	perBucket := map[*bucket][]string{}
	for _, ref := range refs {
		b, err := s.bucketOf(op, ref)
		if err != nil {
			return err
		}
		rel, err := encodeKey(ref.Key)
		if err != nil {
			return &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: ErrInvalidKey, Err: err}
		}
		perBucket[b] = append(perBucket[b], rel)
	}
	if len(refs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Bucket: refs[0].Bucket, Key: refs[0].Key, Err: err}
	}
	var errs []error
	for _, b := range slices.SortedFunc(maps.Keys(perBucket), func(x, y *bucket) int { return strings.Compare(x.name, y.name) }) {
		var failed []error
		err := b.run(ctx, func() error {
			failed = b.remove(perBucket[b])
			return nil
		})
		if err != nil {
			return errors.Join(append(errs, b.opError(ctx, op, perBucket[b][0], err))...)
		}
		errs = append(errs, failed...)
	}
	return errors.Join(errs...)
}

// maxReportedKeys bounds how many per-object Delete failures are reported
// by name.
const maxReportedKeys = 10

// remove unlinks the objects at the given relative paths and syncs their
// directories, returning what failed.
func (b *bucket) remove(rels []string) []error {
	var errs []error
	var unreported int
	fail := func(rel string, err error) {
		if len(errs) == maxReportedKeys {
			unreported++
			return
		}
		errs = append(errs, &Error{Op: "Delete", Bucket: b.name, Key: decodePath(rel), Kind: classify(err), Err: err})
	}
	dirs := map[string]bool{}
	for _, rel := range rels {
		path := filepath.Join(b.dir, filepath.FromSlash(rel))
		// unlink, not os.Remove, which would also remove an empty
		// directory of that name.
		err := syscall.Unlink(path)
		switch {
		case err == nil:
			dirs[filepath.Dir(path)] = true
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		default:
			fail(rel, &fs.PathError{Op: "unlink", Path: path, Err: err})
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := syncDir(dir); err != nil {
			rel, _ := filepath.Rel(b.dir, dir)
			fail(filepath.ToSlash(rel), err)
		}
	}
	if unreported > 0 {
		errs = append(errs, fmt.Errorf("fsstore: Delete %s: %d more objects could not be deleted", b.name, unreported))
	}
	return errs
}

// decodePath returns the key of a path encodeKey made.
func decodePath(rel string) string {
	segs := strings.Split(rel, "/")
	for i, name := range segs {
		if seg, _, ok := decodeName(name); ok {
			segs[i] = seg
		}
	}
	return strings.Join(segs, "/")
}

// List returns the objects of bucket whose keys start with prefix, in no
// particular order. It reads only the directories below prefix's complete
// segments, and removes the temporary files there older than
// Options.TempMaxAge, which writers that crashed left behind. Files the
// store did not write (names it would not give an object, anything not a
// regular file) are not listed.
func (s *Store) List(ctx context.Context, bucketName, prefix string) ([]storage.ObjectInfo, error) {
	const op = "List"
	b, ok := s.buckets[bucketName]
	if !ok {
		return nil, s.unknownBucket(op, bucketName, prefix)
	}
	dir, partial, ok := encodePrefix(prefix)
	if !ok {
		return nil, nil
	}
	keyDir := prefix[:len(prefix)-len(partial)]
	var infos []storage.ObjectInfo
	err := b.run(ctx, func() error {
		// A missing directory below is a prefix without objects; a
		// missing bucket directory is not an empty bucket.
		if err := b.checkRoot(); err != nil {
			return &kindError{kind: storage.ErrUnavailable, err: err}
		}
		l := lister{ctx: ctx, b: b, staleBefore: time.Now().Add(-s.tempMaxAge)}
		if err := l.walk(filepath.Join(b.dir, filepath.FromSlash(dir)), keyDir, partial); err != nil {
			return err
		}
		infos = l.infos
		return nil
	})
	if err != nil {
		return nil, b.opError(ctx, op, prefix, err)
	}
	return infos, nil
}

// lister is one List call's walk.
type lister struct {
	ctx         context.Context
	b           *bucket
	staleBefore time.Time
	infos       []storage.ObjectInfo
}

// walk lists the objects in dir, whose keys start with keyDir, and whose
// next segment starts with partial, and recurses into the matching
// subdirectories. A directory that does not exist holds no objects.
func (l *lister) walk(dir, keyDir, partial string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	entries, err := readDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ent := range entries {
		name := ent.Name()
		seg, isDir, ok := decodeName(name)
		switch {
		case !ok:
			if strings.HasPrefix(name, tempPrefix) {
				l.removeIfStale(filepath.Join(dir, name), ent)
			}
		case !strings.HasPrefix(seg, partial):
		case isDir && ent.IsDir():
			if err := l.walk(filepath.Join(dir, name), keyDir+seg+"/", ""); err != nil {
				return err
			}
		case !isDir && ent.Type().IsRegular():
			fi, err := ent.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted since the directory was read
			}
			if err != nil {
				return err
			}
			l.infos = append(l.infos, storage.ObjectInfo{
				Ref:          metadata.ObjectRef{AZ: l.b.az, Bucket: l.b.name, Key: keyDir + seg},
				Size:         fi.Size(),
				LastModified: fi.ModTime(),
			})
		}
	}
	return nil
}

// readDir reads a directory's entries, unsorted.
func readDir(dir string) ([]fs.DirEntry, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// removeIfStale removes a temporary file last written before staleBefore.
// It is best effort: a file it cannot remove stays for a later List.
func (l *lister) removeIfStale(path string, ent fs.DirEntry) {
	if !ent.Type().IsRegular() {
		return
	}
	if fi, err := ent.Info(); err == nil && fi.ModTime().Before(l.staleBefore) {
		_ = syscall.Unlink(path)
	}
}

// run calls fn, which does one call's file system work, in a goroutine of
// its own holding one of the bucket's slots, and returns its error, or the
// context's once ctx ends: a file server that stops answering blocks the
// goroutine in the kernel, not the caller. The goroutine ends, releasing
// its slot, when the kernel returns; with every slot held by such calls,
// later calls wait for one until their context ends. fn must not touch the
// caller's memory once run has returned an error of ctx.
func (b *bucket) run(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return &busyError{bucket: b.name, slots: cap(b.slots), err: ctx.Err()}
	}
	if ctx.Done() == nil {
		// A context that never ends cannot be waited for instead:
		// spare the goroutine.
		defer func() { <-b.slots }()
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-b.slots }()
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}

// busyError is a call that found every slot of its bucket held until its
// context ended.
type busyError struct {
	bucket string
	slots  int
	err    error
}

func (e *busyError) Error() string {
	return fmt.Sprintf("all %d calls allowed on bucket %s were still in progress when the context ended (a file server that does not answer?): %v", e.slots, e.bucket, e.err)
}

func (e *busyError) Unwrap() error { return e.err }

// busy is the error of a Put that found every slot of its bucket held.
func (b *bucket) busy(op, key string, err error) *Error {
	return &Error{Op: op, Bucket: b.name, Key: key, Err: &busyError{bucket: b.name, slots: cap(b.slots), err: err}}
}

// opError wraps the error of a call on b, classifying it unless it is the
// end of the caller's context, which is left unclassified so that it
// matches only context.Canceled or DeadlineExceeded.
func (b *bucket) opError(ctx context.Context, op, key string, err error) *Error {
	e := &Error{Op: op, Bucket: b.name, Key: key, Err: err}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return e
	}
	var re *kindError
	if errors.As(err, &re) {
		e.Kind = re.kind
	} else {
		e.Kind = classify(err)
	}
	if e.Kind != storage.ErrNotFound {
		return e
	}
	if rootErr := b.checkRoot(); rootErr != nil {
		// Not the object missing but the whole bucket: a directory
		// removed, or a file system not mounted (yet).
		e.Kind, e.Err = storage.ErrUnavailable, errors.Join(rootErr, err)
	} else if op == "Put" {
		// Something not a directory is where the key's directory
		// should be: a file the store did not write.
		e.Kind = nil
	}
	return e
}

// checkRoot checks that the bucket's directory is still there.
func (b *bucket) checkRoot() error {
	fi, err := os.Stat(b.dir)
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is no longer a directory", b.dir)
	}
	if err != nil {
		return fmt.Errorf("the bucket's directory is unusable: %w", err)
	}
	return nil
}

// bucketOf returns ref's bucket, refusing buckets the store was not
// configured with and a configured bucket under another AZ's name.
func (s *Store) bucketOf(op string, ref metadata.ObjectRef) (*bucket, error) {
	b, ok := s.buckets[ref.Bucket]
	if !ok {
		return nil, s.unknownBucket(op, ref.Bucket, ref.Key)
	}
	if ref.AZ != "" && ref.AZ != b.az {
		return nil, &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrUnknownBucket,
			Err: fmt.Errorf("the reference names AZ %q, but the bucket is configured for AZ %q", ref.AZ, b.az)}
	}
	return b, nil
}

func (s *Store) unknownBucket(op, bucketName, key string) error {
	return &Error{Op: op, Bucket: bucketName, Key: key, Kind: storage.ErrUnknownBucket,
		Err: fmt.Errorf("configured buckets are %s", strings.Join(slices.Sorted(maps.Keys(s.buckets)), ", "))}
}
