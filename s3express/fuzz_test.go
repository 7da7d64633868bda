package s3express

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParseContentRange checks the Content-Range parser never panics and
// accepts only well-formed ranges, which it reads back exactly.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{
		"bytes 0-9/10", "bytes 5-14/100", "bytes 0-0/*", "bytes 9-5/10", "bytes -1-5/10",
		"bytes 0-9223372036854775807/9223372036854775807", "bytes 0-99999999999999999999/1",
		"bytes=0-9", "bytes 0-9", "", "bytes a-b/c", "bytes 0--1/5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, size, err := parseContentRange(s)
		if err != nil {
			return
		}
		if first < 0 || last < first || size < -1 {
			t.Fatalf("parseContentRange(%q) = %d, %d, %d", s, first, last, size)
		}
		total := "*"
		if size >= 0 {
			total = fmt.Sprint(size)
		}
		if again, l2, s2, err := parseContentRange(fmt.Sprintf("bytes %d-%d/%s", first, last, total)); err != nil || again != first || l2 != last || s2 != size {
			t.Fatalf("parseContentRange(%q) does not read back: %v", s, err)
		}
	})
}

// FuzzParseBucketName checks the bucket name parser never panics, accepts
// only names within S3's rules, and takes apart directory bucket names
// into a base and AZ id that rebuild the name.
func FuzzParseBucketName(f *testing.F) {
	for _, s := range []string{
		"wal--use1-az4--x-s3", "wal--usw2-lax1-az1--x-s3", "my.bucket-1", "a--b--use1-az4--x-s3",
		"--use1-az4--x-s3", "wal--use1-az4-x-s3", "wal--x-s3", "192.168.0.1", "xn--abc", "ab", "Bucket",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		kind, az, err := parseBucketName(name)
		if err != nil {
			return
		}
		if len(name) < 3 || len(name) > 63 {
			t.Fatalf("accepted %q of length %d", name, len(name))
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !isAlnum(c) && c != '-' && c != '.' {
				t.Fatalf("accepted %q with %q", name, c)
			}
		}
		switch kind {
		case directoryBucket:
			if checkAZID(az) != nil || !strings.HasSuffix(name, "--"+az+directorySuffix) {
				t.Fatalf("directory bucket %q parsed to AZ id %q", name, az)
			}
		case standardBucket:
			if az != "" || strings.HasSuffix(name, "x-s3") {
				t.Fatalf("standard bucket %q parsed to AZ id %q", name, az)
			}
		}
	})
}
