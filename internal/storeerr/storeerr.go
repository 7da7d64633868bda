// Package storeerr holds the errors of walstore's ObjectStore contract, so
// that the protocol cores, which must not import walstore, can classify
// them. walstore re-exports each one under the same name; users test for
// walstore's names, which are these values.
package storeerr

import "errors"

// The ObjectStore contract's errors; walstore documents each.
var (
	ErrNotFound      = errors.New("walstore: object not found")
	ErrAlreadyExists = errors.New("walstore: object already exists")
	ErrUnavailable   = errors.New("walstore: object store unavailable")
	ErrInvalidRange  = errors.New("walstore: invalid byte range")
	ErrUnknownBucket = errors.New("walstore: bucket not configured")
	ErrPermanent     = errors.New("walstore: object store refused the request permanently")
)
