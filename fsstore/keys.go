package fsstore

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on keys. S3 allows keys of 1024 bytes; POSIX file systems allow
// names (one path segment) of 255 bytes (NAME_MAX on Linux, NFS, EFS and
// Lustre).
const (
	maxKeyBytes  = 1024
	maxNameBytes = 255
)

// On-disk names. A key's segments (split at "/") become a path: every
// segment but the last a directory, the last a file. Names are the
// segment with "%" written %25 and a leading "." written %2E, so that no
// object's name starts with "." (the namespace of temporary files, of the
// NFS client's .nfsXXXX files and of "." and ".."). A directory's name
// ends in dirSuffix, which no escaped segment can end in (every "%" of an
// escaped segment is followed by two hex digits): so key "a" (the file
// "a") and key "a/b" (the file "b" in the directory "a%") can both exist,
// as they can in S3.
const (
	dirSuffix  = "%"
	tempPrefix = ".tmp-"
)

// encodeKey returns key's path relative to a bucket directory, with "/"
// separators, or why no object can have that key. Every key it accepts
// maps to a path of plain names below the bucket: no segment is empty,
// ".", "..", or contains a NUL byte, so the path can neither be absolute
// nor climb out of the bucket.
func encodeKey(key string) (string, error) {
	switch {
	case key == "":
		return "", errors.New("empty key")
	case len(key) > maxKeyBytes:
		return "", fmt.Errorf("key is %d bytes; at most %d are allowed", len(key), maxKeyBytes)
	case !utf8.ValidString(key):
		return "", errors.New("key is not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return "", errors.New("key contains a NUL byte")
	}
	segs := strings.Split(key, "/")
	names := make([]string, len(segs))
	for i, seg := range segs {
		if err := checkSegment(seg); err != nil {
			return "", err
		}
		names[i] = escapeSegment(seg)
		// Checked with the suffix, so that any segment can also be a
		// directory's.
		if len(names[i])+len(dirSuffix) > maxNameBytes {
			return "", fmt.Errorf("path segment %q is %d bytes on disk; at most %d are allowed", seg, len(names[i]), maxNameBytes-len(dirSuffix))
		}
	}
	return strings.Join(names, dirSuffix+"/"), nil
}

// checkSegment refuses path segments no key may have.
func checkSegment(seg string) error {
	switch seg {
	case "":
		return errors.New("empty path segment (a leading, trailing or doubled \"/\")")
	case ".", "..":
		return fmt.Errorf("path segment %q", seg)
	}
	return nil
}

// encodePrefix returns the directory path of prefix's complete segments
// (those before its last "/"), relative to the bucket directory with a
// trailing "/" ("" for none), and the partial segment after them that
// listed names must start with. ok is false when no key can start with
// prefix, because a complete segment is not one a key may have.
func encodePrefix(prefix string) (dir, partial string, ok bool) {
	if !utf8.ValidString(prefix) || strings.IndexByte(prefix, 0) >= 0 {
		return "", "", false
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return "", prefix, true
	}
	var b strings.Builder
	for seg := range strings.SplitSeq(prefix[:i], "/") {
		if checkSegment(seg) != nil {
			return "", "", false
		}
		b.WriteString(escapeSegment(seg))
		b.WriteString(dirSuffix + "/")
	}
	return b.String(), prefix[i+1:], true
}

// escapeSegment writes "%" as %25 and a leading "." as %2E.
func escapeSegment(seg string) string {
	if !strings.HasPrefix(seg, ".") && !strings.Contains(seg, "%") {
		return seg
	}
	var b strings.Builder
	b.Grow(len(seg) + 4)
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case c == '%':
			b.WriteString("%25")
		case c == '.' && i == 0:
			b.WriteString("%2E")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decodeName returns the key segment a directory entry's name stands
// for, and whether it names a directory. ok is false for names the store
// never writes: temporary files, other dot files, names that are not the
// canonical escape of a valid segment. List skips those, so a file put in
// a bucket by other means is never mistaken for an object, and every key
// List returns reads back the same file.
func decodeName(name string) (seg string, isDir, ok bool) {
	if name == "" || name[0] == '.' || len(name) > maxNameBytes {
		return "", false, false
	}
	if s, found := strings.CutSuffix(name, dirSuffix); found {
		name, isDir = s, true
	}
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) || !isUpperHex(name[i+1]) || !isUpperHex(name[i+2]) {
			return "", false, false
		}
		b.WriteByte(unhex(name[i+1])<<4 | unhex(name[i+2]))
		i += 2
	}
	if len(name)+len(dirSuffix) > maxNameBytes {
		return "", false, false // longer than encodeKey allows
	}
	seg = b.String()
	if checkSegment(seg) != nil || !utf8.ValidString(seg) || strings.ContainsAny(seg, "/\x00") || escapeSegment(seg) != name {
		return "", false, false
	}
	return seg, isDir, true
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}
