package gcsstore

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzKeyProblem checks the key check never panics and accepts only names
// within Cloud Storage's rules: valid UTF-8, 1 to 1024 bytes, no control
// characters, not "." or "..".
func FuzzKeyProblem(f *testing.F) {
	for _, s := range []string{"seg/0001", "", ".", "..", "a\nb", "\xff", "ключ", ".well-known/acme-challenge/x", strings.Repeat("k", 1025)} {
		f.Add("", s)
		f.Add("p/", s)
	}
	f.Fuzz(func(t *testing.T, prefix, key string) {
		if keyProblem(prefix, key) != "" {
			return
		}
		name := prefix + key
		if key == "" || !utf8.ValidString(key) || len(name) > maxKeyBytes || name == "." || name == ".." {
			t.Fatalf("keyProblem(%q, %q) accepted a name Cloud Storage refuses", prefix, key)
		}
		for _, r := range key {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
				t.Fatalf("keyProblem(%q, %q) accepted control character %U", prefix, key, r)
			}
		}
	})
}

// FuzzCheckBucketName checks the bucket name check never panics and
// accepts only names within Cloud Storage's rules.
func FuzzCheckBucketName(f *testing.F) {
	for _, s := range []string{"wal-us-central1-a", "wal.example.com", "ab", "Wal", "goog-x", "my-google", "192.168.0.1", "a..b", "a_b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if checkBucketName(name) != nil {
			return
		}
		if len(name) < 3 || len(name) > maxBucketName || strings.HasPrefix(name, "goog") || strings.Contains(name, "google") {
			t.Fatalf("checkBucketName accepted %q", name)
		}
		if _, err := netip.ParseAddr(name); err == nil {
			t.Fatalf("checkBucketName accepted the IP address %q", name)
		}
		for part := range strings.SplitSeq(name, ".") {
			if part == "" || len(part) > maxNamePart {
				t.Fatalf("checkBucketName accepted %q with part %q", name, part)
			}
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
				t.Fatalf("checkBucketName accepted %q with %q", name, c)
			}
		}
	})
}
