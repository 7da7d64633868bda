package s3express

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// directorySuffix ends every S3 Express One Zone directory bucket name:
// "base--azid--x-s3".
const directorySuffix = "--x-s3"

// bucketKind says how a bucket's name was read.
type bucketKind int

const (
	standardBucket bucketKind = iota
	directoryBucket
)

// parseBucketName validates name as an S3 bucket name and, for a directory
// bucket ("base--azid--x-s3"), returns the AZ id embedded in it.
func parseBucketName(name string) (kind bucketKind, azID string, err error) {
	if len(name) < 3 || len(name) > 63 {
		return 0, "", fmt.Errorf("bucket name %q is %d characters long; S3 allows 3 to 63", name, len(name))
	}
	if base, ok := strings.CutSuffix(name, directorySuffix); ok {
		azID, err = parseDirectoryBase(base)
		if err != nil {
			return 0, "", fmt.Errorf("directory bucket name %q (want base--azid--x-s3): %w", name, err)
		}
		return directoryBucket, azID, nil
	}
	if err := checkStandardName(name); err != nil {
		return 0, "", fmt.Errorf("bucket name %q: %w", name, err)
	}
	return standardBucket, "", nil
}

// parseDirectoryBase splits "base--azid" and checks both parts.
func parseDirectoryBase(s string) (azID string, err error) {
	i := strings.LastIndex(s, "--")
	if i < 0 {
		return "", errors.New("no \"--\" between the base name and the AZ id")
	}
	base, azID := s[:i], s[i+2:]
	if base == "" {
		return "", errors.New("empty base name")
	}
	if !isAlnum(base[0]) || !isAlnum(base[len(base)-1]) {
		return "", fmt.Errorf("base name %q must start and end with a letter or digit", base)
	}
	for j := 0; j < len(base); j++ {
		if c := base[j]; !isAlnum(c) && c != '-' {
			return "", fmt.Errorf("base name %q has %q; only lowercase letters, digits and '-' are allowed", base, c)
		}
	}
	if err := checkAZID(azID); err != nil {
		return "", err
	}
	return azID, nil
}

// checkAZID accepts AWS zone ids: a region code, an optional Local Zone
// location, and "azN" ("use1-az4", "usw2-lax1-az1").
func checkAZID(id string) error {
	parts := strings.Split(id, "-")
	if len(parts) < 2 {
		return fmt.Errorf("AZ id %q is not of the form region-azN (such as use1-az4)", id)
	}
	for _, p := range parts {
		if p == "" {
			return fmt.Errorf("AZ id %q has an empty part", id)
		}
		for j := 0; j < len(p); j++ {
			if !isAlnum(p[j]) {
				return fmt.Errorf("AZ id %q has %q; only lowercase letters, digits and '-' are allowed", id, p[j])
			}
		}
	}
	last := parts[len(parts)-1]
	if len(last) < 3 || !strings.HasPrefix(last, "az") || strings.Trim(last[2:], "0123456789") != "" {
		return fmt.Errorf("AZ id %q does not end in azN (such as use1-az4)", id)
	}
	return nil
}

// checkStandardName applies the general purpose bucket naming rules that
// can be checked offline. Names reserved for other bucket types are refused
// so that a typo in a directory bucket name is not silently taken for a
// standard bucket.
func checkStandardName(name string) error {
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return errors.New("must start and end with a lowercase letter or digit")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '.' {
			return fmt.Errorf("has %q; only lowercase letters, digits, '-' and '.' are allowed", c)
		}
	}
	if strings.Contains(name, "..") {
		return errors.New(`must not contain ".."`)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return errors.New("must not be formatted as an IP address")
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("prefix %q is reserved by S3", p)
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return fmt.Errorf("suffix %q is reserved by S3", s)
		}
	}
	if strings.HasSuffix(name, "x-s3") || strings.Contains(name, "--x-") {
		return fmt.Errorf("looks like a directory bucket name but does not end in %q", directorySuffix)
	}
	return nil
}

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
