// Package storeutil holds what the object store packages (s3express,
// gcsstore) share about HTTP object stores: parsing a Content-Range,
// telling an attempt's timeout from the caller's, telling a request that
// never left from one whose outcome is unknown, and the key characters
// neither can carry.
package storeutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseContentRange parses "bytes first-last/size" (size may be "*", -1).
func ParseContentRange(s string) (first, last, size int64, err error) {
	spec, ok := strings.CutPrefix(s, "bytes ")
	rng, total, ok2 := strings.Cut(spec, "/")
	a, b, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, 0, fmt.Errorf("malformed Content-Range %q", s)
	}
	if first, err = strconv.ParseInt(a, 10, 64); err == nil {
		last, err = strconv.ParseInt(b, 10, 64)
	}
	if err == nil {
		size = -1
		if total != "*" {
			size, err = strconv.ParseInt(total, 10, 64)
		}
	}
	if err != nil || first < 0 || last < first || size != -1 && size <= last {
		return 0, 0, 0, fmt.Errorf("malformed Content-Range %q", s)
	}
	return first, last, size, nil
}

// HideContextErr keeps an attempt's context error (a store's per-attempt
// deadline, or the HTTP client's timeout) from making err match
// context.DeadlineExceeded or context.Canceled, which callers read as
// their own context ending. errors.As still reaches everything err wraps.
func HideContextErr(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	return attemptError{err}
}

// attemptError is an error of an attempt a store gave up on, with the
// context errors it wraps hidden from errors.Is (it has no Unwrap) but
// every other error reachable through errors.As.
type attemptError struct{ err error }

func (e attemptError) Error() string      { return e.err.Error() }
func (e attemptError) As(target any) bool { return errors.As(e.err, target) }

// NeverSent reports whether err is a failure to reach the server at all
// (name resolution, connecting), after which a request cannot have had any
// effect.
func NeverSent(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) && opErr.Op == "dial"
}

// ControlChar returns the first character of key that XML 1.0 cannot carry,
// or carries only as a discouraged character (C0 and C1 controls, DEL),
// and whether there is one. S3's DeleteObjects and listings and Cloud
// Storage's XML API are XML: a key holding one cannot be sent or read back
// reliably.
func ControlChar(key string) (rune, bool) {
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
			return r, true
		}
	}
	return 0, false
}

// Stored is what a store found under a key when, unsure whether its own
// conditional write landed (an answer lost), it read the key back.
type Stored int

// What a read-back can find.
const (
	StoredUnknown Stored = iota // missing, or could not be read
	StoredOurs                  // exactly the body the write sent
	StoredOther                 // another object
)

// ErrorText formats a store's error as "store: op bucket/key: kind: cause",
// leaving out the kind or the cause when it is nil.
func ErrorText(store, op, bucket, key string, kind, cause error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s/%s", store, op, bucket, key)
	for _, e := range []error{kind, cause} {
		if e != nil {
			b.WriteString(": ")
			b.WriteString(e.Error())
		}
	}
	return b.String()
}

// KindAndCause returns those of kind and cause that are not nil: what a
// store error's Unwrap returns, so that errors.Is and errors.As see both.
func KindAndCause(kind, cause error) []error {
	errs := make([]error, 0, 2)
	for _, e := range []error{kind, cause} {
		if e != nil {
			errs = append(errs, e)
		}
	}
	return errs
}
