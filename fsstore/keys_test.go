package fsstore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeKey(t *testing.T) {
	for _, tc := range []struct{ key, path string }{
		{"a", "a"},
		{"a/b/c.wal", "a%/b%/c.wal"},
		{"cluster/1/lx3-abc.wal", "cluster%/1%/lx3-abc.wal"},
		{".hidden", "%2Ehidden"},
		{"a/..b", "a%/%2E.b"},
		{"100%", "100%25"},
		{"%2E", "%252E"},
		{"a%/b", "a%25%/b"},
		{"dots..in..key", "dots..in..key"},
		{"sp ace", "sp ace"},
	} {
		got, err := encodeKey(tc.key)
		require.NoError(t, err, tc.key)
		assert.Equal(t, tc.path, got, tc.key)
		assert.Equal(t, tc.key, decodePath(got), "decodePath(%q)", got)
	}
}

func TestDecodeNameRefusesNonCanonical(t *testing.T) {
	for _, name := range []string{"", ".", "..", ".tmp-1", "%", "%%", "%2", "%2e", "%61", "%2F", "a%2", "%00", "%FF", "%C3", "%2E%", "%25%%"} {
		_, _, ok := decodeName(name)
		assert.False(t, ok, "%q", name)
	}
	for _, tc := range []struct {
		name, seg string
		dir       bool
	}{{"a", "a", false}, {"a%", "a", true}, {"%25%", "%", true}, {"%2E%2E%", "", false}, {"%2E.", "", false}, {"%2Ex", ".x", false}} {
		seg, dir, ok := decodeName(tc.name)
		if tc.seg == "" {
			assert.False(t, ok, "%q decodes to a segment no key may have", tc.name)
			continue
		}
		require.True(t, ok, tc.name)
		assert.Equal(t, tc.seg, seg)
		assert.Equal(t, tc.dir, dir)
	}
}

// FuzzEncodeKey: every key encodeKey accepts maps to a path below the
// bucket whose names decode back to the key's segments, none of them a
// dot file; and the path of no other key is the same.
func FuzzEncodeKey(f *testing.F) {
	for _, k := range []string{"a", "a/b", ".x", "x/../y", "%", "a%/b", "/", "a//b", "\x00", "ü/日本"} {
		f.Add(k, k+"x")
	}
	f.Fuzz(func(t *testing.T, key, other string) {
		path, err := encodeKey(key)
		if err != nil {
			return
		}
		require.True(t, filepath.IsLocal(filepath.FromSlash(path)), "%q maps to %q, outside the bucket", key, path)
		names := strings.Split(path, "/")
		segs := strings.Split(key, "/")
		require.Len(t, names, len(segs))
		for i, name := range names {
			require.LessOrEqual(t, len(name), maxNameBytes)
			seg, isDir, ok := decodeName(name)
			require.True(t, ok, "name %q of key %q does not decode", name, key)
			require.Equal(t, segs[i], seg)
			require.Equal(t, i < len(names)-1, isDir)
		}
		if otherPath, err := encodeKey(other); err == nil && other != key {
			require.NotEqual(t, path, otherPath, "keys %q and %q share a path", key, other)
		}
		dir, partial, ok := encodePrefix(key)
		require.True(t, ok)
		require.True(t, strings.HasPrefix(path, dir), "prefix %q of key %q is not a directory of its path %q", dir, key, path)
		require.True(t, strings.HasPrefix(key[len(key)-len(partial):], partial))
	})
}

// FuzzDecodeName: any directory entry's name decodes to at most one
// segment, whose encoding is that name.
func FuzzDecodeName(f *testing.F) {
	for _, n := range []string{"a", "a%", "%25", "%2Ex", "%2", ".tmp-x", "%FF%"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		seg, isDir, ok := decodeName(name)
		if !ok {
			return
		}
		want := escapeSegment(seg)
		if isDir {
			want += dirSuffix
		}
		require.Equal(t, name, want)
		_, err := encodeKey(seg)
		require.NoError(t, err, "decoded segment %q is not a valid key", seg)
	})
}
