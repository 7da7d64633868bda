package gcsstore

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/activetier/activetier/internal/storeutil"
)

// Cloud Storage limits the store checks before sending anything.
const (
	maxKeyBytes = 1024
	// maxBucketName is the longest bucket name with dots; a name without
	// dots, and each dot-separated part, is at most 63 characters.
	maxBucketName = 222
	maxNamePart   = 63
)

// checkBucketName applies the bucket naming rules of Cloud Storage's
// documentation ("Bucket names") that can be checked offline.
func checkBucketName(name string) error {
	if len(name) < 3 || len(name) > maxBucketName {
		return fmt.Errorf("bucket name %q is %d characters long; Cloud Storage allows 3 to 63 (222 with dots)", name, len(name))
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return fmt.Errorf("bucket name %q must start and end with a lowercase letter or digit", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("bucket name %q has %q; only lowercase letters, digits, '-', '_' and '.' are allowed", name, c)
		}
	}
	for part := range strings.SplitSeq(name, ".") {
		if part == "" || len(part) > maxNamePart {
			return fmt.Errorf("bucket name %q: each dot-separated part must be 1 to 63 characters", name)
		}
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return fmt.Errorf("bucket name %q must not be formatted as an IP address", name)
	}
	if strings.HasPrefix(name, "goog") || strings.Contains(name, "google") {
		return fmt.Errorf("bucket name %q: names starting with \"goog\" or containing \"google\" are reserved", name)
	}
	return nil
}

// checkZone accepts Compute Engine zone names ("us-central1-a"): lowercase
// letters, digits and '-', starting with a letter. Zone names are the same
// in every project, so unlike AWS AZ names they need no id to be stable.
func checkZone(zone string) error {
	if zone == "" {
		return errors.New("empty zone name")
	}
	if zone[0] < 'a' || zone[0] > 'z' {
		return fmt.Errorf("zone %q must start with a lowercase letter (such as us-central1-a)", zone)
	}
	for i := 0; i < len(zone); i++ {
		if c := zone[i]; !isAlnum(c) && c != '-' {
			return fmt.Errorf("zone %q has %q; only lowercase letters, digits and '-' are allowed", zone, c)
		}
	}
	return nil
}

// keyProblem says why Cloud Storage would refuse, or mishandle, the object
// name prefix+key, or returns "" for a name it accepts. Control characters
// are refused although the JSON API stores most of them: the XML API,
// which reads go through, cannot carry them, and a key the store cannot
// read back is no use.
func keyProblem(prefix, key string) string {
	name := prefix + key
	switch {
	case key == "":
		return "empty key"
	case !utf8.ValidString(key):
		return "key is not valid UTF-8"
	case len(name) > maxKeyBytes:
		return fmt.Sprintf("key is %d bytes with the key prefix; Cloud Storage allows %d", len(name), maxKeyBytes)
	case name == "." || name == "..":
		return fmt.Sprintf("object name %q is reserved", name)
	case strings.HasPrefix(name, ".well-known/acme-challenge/"):
		return "object names under .well-known/acme-challenge/ are reserved"
	}
	if r, ok := storeutil.ControlChar(key); ok {
		return fmt.Sprintf("key has control character %U", r)
	}
	return ""
}

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
