package s3express

import (
	"strings"
	"testing"
)

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
