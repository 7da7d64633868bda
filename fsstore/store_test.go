package fsstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fsstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

func TestNewValidatesOptions(t *testing.T) {
	root := t.TempDir()
	a, b := mkdir(t, filepath.Join(root, "a")), mkdir(t, filepath.Join(root, "b"))
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	two := func(x, y fsstore.Bucket) map[string]fsstore.Bucket {
		return map[string]fsstore.Bucket{"az1": x, "az2": y}
	}
	for _, tc := range []struct {
		name string
		opts fsstore.Options
		want string
	}{
		{"no buckets", fsstore.Options{LocalAZ: "az1"}, "Options.Buckets is empty"},
		{"local AZ not configured", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Dir: b}), LocalAZ: "az3"}, `LocalAZ "az3" is not a key of Options.Buckets (az1, az2)`},
		{"empty dir", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{}), LocalAZ: "az1"}, `Buckets["az2"]: Dir is empty`},
		{"missing dir", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Dir: filepath.Join(root, "nope")}), LocalAZ: "az1"}, "no such file or directory"},
		{"dir is a file", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Dir: file}), LocalAZ: "az1"}, "is not a directory"},
		{"same dir twice", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Dir: a + "/."}), LocalAZ: "az1"}, "overlap"},
		{"nested dirs", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: root}, fsstore.Bucket{Dir: b}), LocalAZ: "az1"}, "overlap"},
		{"same name twice", fsstore.Options{Buckets: two(fsstore.Bucket{Name: "x", Dir: a}, fsstore.Bucket{Name: "x", Dir: b}), LocalAZ: "az1"}, `bucket name "x" is used by both`},
		{"name defaults to another AZ's", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Name: "az1", Dir: b}), LocalAZ: "az1"}, `bucket name "az1" is used by both`},
		{"AZ with space", fsstore.Options{Buckets: map[string]fsstore.Bucket{" az1": {Dir: a}}, LocalAZ: " az1"}, "without surrounding space"},
		{"short TempMaxAge", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Dir: b}), LocalAZ: "az1", TempMaxAge: time.Second}, "TempMaxAge 1s is below 1m0s"},
		{"negative MaxPending", fsstore.Options{Buckets: two(fsstore.Bucket{Dir: a}, fsstore.Bucket{Dir: b}), LocalAZ: "az1", MaxPending: -1}, "MaxPending -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := fsstore.New(tc.opts)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	entries, err := os.ReadDir(a)
	require.NoError(t, err)
	assert.Empty(t, entries, "New's probe leaves nothing behind")
}

func TestNewResolvesRelativeDirs(t *testing.T) {
	root := t.TempDir()
	mkdir(t, filepath.Join(root, "az1"))
	mkdir(t, filepath.Join(root, "az2"))
	t.Chdir(root)
	s := newStore(t, fsstore.Options{Buckets: map[string]fsstore.Bucket{"az1": {Dir: "az1"}, "az2": {Dir: "./az2"}}, LocalAZ: "az1"})
	assert.Equal(t, metadata.ObjectRef{AZ: "az1", Bucket: "az1"}, s.Local(), "the bucket name defaults to the AZ")
	t.Chdir(t.TempDir())
	_, err := s.Put(t.Context(), "k", []byte("x"))
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(root, "az1", "k"), "the directory was resolved when New was called")
}

// Keys that would name a path outside the bucket, or that no object can
// have, are refused before any file is touched.
func TestInvalidKeys(t *testing.T) {
	opts := twoAZs(t, "az1")
	s := newStore(t, opts)
	ctx := t.Context()
	root := filepath.Dir(opts.Buckets["az1"].Dir)
	existing, err := s.Put(ctx, "existing", []byte("x"))
	require.NoError(t, err)
	for _, key := range []string{
		"", "/abs", "/", "a//b", "a/", "..", "../x", "a/../../x", ".", "./a", "a/./b", "a/.",
		"nul\x00byte", "bad\xffutf8", strings.Repeat("k", 1025), strings.Repeat("s", 255) + "/x",
	} {
		_, err := s.Put(ctx, key, []byte("data"))
		require.ErrorIs(t, err, fsstore.ErrInvalidKey, "Put %q", key)
		assert.NotErrorIs(t, err, storage.ErrNotFound)

		ref := s.Local()
		ref.Key = key
		_, err = s.GetRange(ctx, ref, 0, 1)
		require.ErrorIs(t, err, storage.ErrNotFound, "GetRange %q: no object can have the key", key)
		require.ErrorIs(t, err, fsstore.ErrInvalidKey, "GetRange %q", key)

		err = s.Delete(ctx, []metadata.ObjectRef{existing, ref})
		require.ErrorIs(t, err, fsstore.ErrInvalidKey, "Delete %q", key)
	}
	got, err := s.GetRange(ctx, existing, 0, 1)
	require.NoError(t, err, "Delete checks every key before removing anything")
	assert.Equal(t, []byte("x"), got)
	assert.Equal(t, []string{"az1", "az2"}, dirNames(t, root), "nothing was written beside the buckets")

	// The longest key and segment that fit are fine.
	for _, key := range []string{strings.Repeat("k", 254), strings.Repeat("a/", 511) + "b"} {
		_, err := s.Put(ctx, key, []byte("fits"))
		require.NoError(t, err, "%d-byte key", len(key))
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Keys that look like the store's own names on disk (dot files, escapes,
// the directory marker) are stored and listed as they were given, and a
// key and a key below it (as "a" and "a/b") coexist, as in S3.
func TestKeysLikeTheOnDiskNames(t *testing.T) {
	s := newStore(t, twoAZs(t, "az1"))
	ctx := t.Context()
	keys := []string{
		".hidden", "a/.b", ".tmp-0123456789abcdef", "..dots", "...",
		"%", "%25", "%2E", "x%", "x%/y", "dir/x%", "%zz",
		"a", "a/b", "a/b/c", "a%/b",
		"trailing.", "sp ace/ünï/日本", "back\\slash", "new\nline",
	}
	want := map[string][]byte{}
	for i, key := range keys {
		body := bytes.Repeat([]byte{byte(i)}, i+1)
		_, err := s.Put(ctx, key, body)
		require.NoError(t, err, "Put %q", key)
		want[key] = body
	}
	for _, key := range keys {
		_, err := s.Put(ctx, key, []byte("again"))
		require.ErrorIs(t, err, storage.ErrAlreadyExists, "each key is its own object: %q", key)
		got, err := s.GetRange(ctx, ref(s, key), 0, int64(len(want[key])))
		require.NoError(t, err, "GetRange %q", key)
		assert.Equal(t, want[key], got, key)
	}
	infos, err := s.List(ctx, s.Local().Bucket, "")
	require.NoError(t, err)
	got := map[string]int64{}
	for _, info := range infos {
		got[info.Ref.Key] = info.Size
	}
	wantSizes := map[string]int64{}
	for k, v := range want {
		wantSizes[k] = int64(len(v))
	}
	assert.Equal(t, wantSizes, got)

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"a", []string{"a", "a/b", "a/b/c", "a/.b", "a%/b"}},
		{"a/", []string{"a/b", "a/b/c", "a/.b"}},
		{"a/b", []string{"a/b", "a/b/c"}},
		{"a%", []string{"a%/b"}},
		{"x%", []string{"x%", "x%/y"}},
		{".", []string{".hidden", ".tmp-0123456789abcdef", "..dots", "..."}},
		{"..", []string{"..dots", "..."}},
		{"../", nil},
		{"a//", nil},
		{"/", nil},
		{"nope/", nil},
		{"sp ace/ü", []string{"sp ace/ünï/日本"}},
	} {
		infos, err := s.List(ctx, s.Local().Bucket, tc.prefix)
		require.NoError(t, err, tc.prefix)
		var keys []string
		for _, info := range infos {
			keys = append(keys, info.Ref.Key)
		}
		assert.ElementsMatch(t, tc.want, keys, "List(%q)", tc.prefix)
	}
}

func ref(s *fsstore.Store, key string) metadata.ObjectRef {
	r := s.Local()
	r.Key = key
	return r
}

// Files the store did not write are not objects: List skips them and they
// do not block keys.
func TestForeignFilesAreNotObjects(t *testing.T) {
	opts := twoAZs(t, "az1")
	s := newStore(t, opts)
	ctx := t.Context()
	dir := opts.Buckets["az1"].Dir
	_, err := s.Put(ctx, "d/real", []byte("real"))
	require.NoError(t, err)
	for _, name := range []string{"%61", "bad%zz", "low%2e", ".nfs000000001", "d%/.nfs0002", "%2E.", "%2E"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte("foreign"), 0o644), name)
	}
	mkdir(t, filepath.Join(dir, "plain-dir", "x")) // a directory without the marker
	mkdir(t, filepath.Join(dir, "marked-dir%"))    // empty: no objects
	require.NoError(t, os.Symlink(filepath.Join(dir, "d%", "real"), filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(dir, filepath.Join(dir, "loop%")))

	infos, err := s.List(ctx, s.Local().Bucket, "")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, "d/real", infos[0].Ref.Key)

	// "a" is stored as "a", so the foreign "%61" neither is it nor takes it.
	_, err = s.GetRange(ctx, ref(s, "a"), 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = s.Put(ctx, "a", []byte("a"))
	require.NoError(t, err)
	_, err = s.GetRange(ctx, ref(s, "plain-dir"), 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound, "a directory is not an object")
}

// A file in the way of a key's directory makes Put fail with an error an
// operator must read, not ErrNotFound.
func TestPutBlockedByAFile(t *testing.T) {
	opts := twoAZs(t, "az1")
	s := newStore(t, opts)
	require.NoError(t, os.WriteFile(filepath.Join(opts.Buckets["az1"].Dir, "x%"), nil, 0o644))
	_, err := s.Put(t.Context(), "x/y", []byte("data"))
	require.Error(t, err)
	var e *fsstore.Error
	require.ErrorAs(t, err, &e)
	assert.Nil(t, e.Kind, "%v", err)
	assert.Equal(t, "Put", e.Op)
	assert.Equal(t, "x/y", e.Key)
}

// A bucket directory that disappears (removed, or a file system not
// mounted) is ErrUnavailable, not an empty bucket whose objects are gone.
func TestBucketDirectoryGone(t *testing.T) {
	opts := twoAZs(t, "az1")
	s := newStore(t, opts)
	ctx := t.Context()
	r, err := s.Put(ctx, "p/obj", []byte("data"))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(opts.Buckets["az1"].Dir))

	_, err = s.GetRange(ctx, r, 0, 1)
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.NotErrorIs(t, err, storage.ErrNotFound)
	assert.Contains(t, err.Error(), "the bucket's directory is unusable")
	_, err = s.List(ctx, r.Bucket, "p/")
	require.ErrorIs(t, err, storage.ErrUnavailable)
	_, err = s.Put(ctx, "p/other", []byte("data"))
	require.ErrorIs(t, err, storage.ErrUnavailable)

	mkdir(t, opts.Buckets["az1"].Dir)
	_, err = s.Put(ctx, "p/other", []byte("data"))
	require.NoError(t, err, "the bucket is back")
}

// Temporary files are never listed or read as objects; List removes those
// a crashed writer left, once they are older than TempMaxAge, and leaves a
// writer's current ones alone.
func TestTempFiles(t *testing.T) {
	opts := twoAZs(t, "az1")
	opts.TempMaxAge = time.Hour
	s := newStore(t, opts)
	ctx := t.Context()
	_, err := s.Put(ctx, "broker-1/obj", []byte("object"))
	require.NoError(t, err)
	dir := filepath.Join(opts.Buckets["az1"].Dir, "broker-1%")
	stale := filepath.Join(dir, ".tmp-00000000deadbeef")
	fresh := filepath.Join(dir, ".tmp-00000000cafef00d")
	other := filepath.Join(dir, ".nfs0000000000001")
	for _, p := range []string{stale, fresh, other} {
		require.NoError(t, os.WriteFile(p, []byte("half an obj"), 0o644))
	}
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))
	require.NoError(t, os.Chtimes(other, old, old))

	_, err = s.GetRange(ctx, ref(s, "broker-1/.tmp-00000000deadbeef"), 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound, "a key with a temporary file's name is another file")

	infos, err := s.List(ctx, s.Local().Bucket, "broker-1/")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, "broker-1/obj", infos[0].Ref.Key)
	assert.NoFileExists(t, stale, "a crashed writer's temporary file is removed")
	assert.FileExists(t, fresh, "a temporary file younger than TempMaxAge may be a writer's")
	assert.FileExists(t, other, "only the store's own temporary files are removed")

	// List removes only in the directories it reads.
	mkdir(t, filepath.Join(opts.Buckets["az1"].Dir, "elsewhere%"))
	elsewhere := filepath.Join(opts.Buckets["az1"].Dir, "elsewhere%", ".tmp-0000000000000001")
	require.NoError(t, os.WriteFile(elsewhere, nil, 0o644))
	require.NoError(t, os.Chtimes(elsewhere, old, old))
	_, err = s.List(ctx, s.Local().Bucket, "broker-1/")
	require.NoError(t, err)
	assert.FileExists(t, elsewhere)
	_, err = s.List(ctx, s.Local().Bucket, "")
	require.NoError(t, err)
	assert.NoFileExists(t, elsewhere)
}

// A Put whose context ends before its object is published stores nothing
// and leaves no temporary file.
func TestPutCanceledStoresNothing(t *testing.T) {
	opts := twoAZs(t, "az1")
	s := newStore(t, opts)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Put(ctx, "k", []byte("data"))
	require.ErrorIs(t, err, context.Canceled)
	var e *fsstore.Error
	require.ErrorAs(t, err, &e)
	assert.Nil(t, e.Kind, "the caller's cancellation is not the store's failure")
	assert.Empty(t, tempFiles(t, opts.Buckets["az1"].Dir))
	_, err = s.GetRange(t.Context(), ref(s, "k"), 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func TestErrorNamesTheObject(t *testing.T) {
	s := newStore(t, twoAZs(t, "az1"))
	_, err := s.GetRange(t.Context(), ref(s, "dir/missing"), 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound)
	var e *fsstore.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "GetRange", e.Op)
	assert.Equal(t, "bucket-az1", e.Bucket)
	assert.Equal(t, "dir/missing", e.Key)
	var pathErr *os.PathError
	require.ErrorAs(t, err, &pathErr, "the file's path is reachable")
	assert.True(t, strings.HasSuffix(pathErr.Path, filepath.FromSlash("/dir%/missing")), pathErr.Path)
	assert.True(t, strings.HasPrefix(err.Error(), "fsstore: GetRange bucket-az1/dir/missing: walstore: object not found: "), err.Error())

	// A configured bucket under another AZ's name is not that bucket.
	r := ref(s, "x")
	r.AZ = "az2"
	_, err = s.GetRange(t.Context(), r, 0, 1)
	require.ErrorIs(t, err, storage.ErrUnknownBucket)
}

// Delete reports what it could not remove, by key, and removes the rest.
func TestDeleteReportsFailures(t *testing.T) {
	opts := twoAZs(t, "az1")
	s := newStore(t, opts)
	ctx := t.Context()
	a, err := s.Put(ctx, "a", []byte("a"))
	require.NoError(t, err)
	// A directory where an object would be cannot be unlinked.
	mkdir(t, filepath.Join(opts.Buckets["az1"].Dir, "d", "child"))
	var refs []metadata.ObjectRef
	for range 12 {
		refs = append(refs, ref(s, "d"))
	}
	err = s.Delete(ctx, append(refs, a))
	require.Error(t, err)
	var e *fsstore.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "d", e.Key)
	assert.Contains(t, err.Error(), "2 more objects could not be deleted")
	_, err = s.GetRange(ctx, a, 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound, "the other object was deleted")
}

func TestListCanceled(t *testing.T) {
	s := newStore(t, twoAZs(t, "az1"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.List(ctx, s.Local().Bucket, "")
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, storage.ErrUnavailable))
	infos, err := s.List(t.Context(), "bucket-az2", "")
	require.NoError(t, err)
	assert.Empty(t, infos, "an empty bucket")
}
