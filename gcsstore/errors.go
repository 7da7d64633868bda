package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gcs "cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/activetier/activetier/internal/storeutil"
	"github.com/activetier/activetier/storage"
)

// ErrInvalidKey is returned, before any request is made, for an object key
// Cloud Storage cannot store or read back: empty, not valid UTF-8, longer
// than 1024 bytes once Options.KeyPrefix is added, holding a control
// character, or a reserved name.
var ErrInvalidKey = errors.New("gcsstore: invalid object key")

// Error is the error every Store method returns for a failed operation. It
// names the operation and the object, matches the walstore sentinel it was
// classified as (Kind) under errors.Is, and keeps the client library's
// error (Err), so that errors.As still finds *googleapi.Error.
type Error struct {
	// Op is the Store method: "Put", "GetRange", "ReadRange", "Delete" or
	// "List".
	Op string
	// Bucket and Key name the object as the caller did (Key without
	// Options.KeyPrefix); Key is the listed prefix for List.
	Bucket, Key string
	// Status is the HTTP status of the failed answer, or 0 if there was
	// none (no answer, or a gRPC client).
	Status int
	// Reason is Cloud Storage's reason ("conditionNotMet", "forbidden",
	// ...) or, with the gRPC client, the status code's name, if known.
	Reason string
	// Attempts is how many requests the operation made.
	Attempts int
	// Kind is the walstore sentinel the error matches (ErrNotFound,
	// ErrAlreadyExists, ErrUnavailable, ErrInvalidRange, ErrPermanent,
	// ErrUnknownBucket), ErrInvalidKey, or nil when the caller's context
	// ended.
	Kind error
	// Err is the underlying error.
	Err error
}

// Error formats the error as "gcsstore: Op bucket/key: kind: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(storeutil.ErrorText("gcsstore", e.Op, e.Bucket, e.Key, e.Kind, e.Err))
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap returns Kind and Err, so errors.Is and errors.As see both.
func (e *Error) Unwrap() []error { return storeutil.KindAndCause(e.Kind, e.Err) }

// newError classifies err, the last attempt's error of op, into an
// *Error. The caller has checked that its own context has not ended.
func newError(op, bucket, key string, attempts int, err error) *Error {
	e := &Error{Op: op, Bucket: bucket, Key: key, Attempts: attempts, Err: err, Kind: classify(op, err)}
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) {
		e.Status = apiErr.Code
		if len(apiErr.Errors) > 0 {
			e.Reason = apiErr.Errors[0].Reason
		}
	} else if st, ok := grpcStatus(err); ok {
		e.Reason = st.Code().String()
	}
	return e
}

// callerError is the error of an operation whose caller's context ended:
// it wraps ctx's error, matches no walstore sentinel, and keeps the last
// attempt's error for the message.
func callerError(ctx context.Context, op, bucket, key string, attempts int, last error) *Error {
	err := context.Cause(ctx)
	if last != nil && !errors.Is(last, ctx.Err()) {
		err = fmt.Errorf("%w (the last attempt: %w)", ctx.Err(), storeutil.HideContextErr(last))
	} else if last != nil {
		err = fmt.Errorf("%w (the last attempt: %v)", ctx.Err(), last)
	}
	return &Error{Op: op, Bucket: bucket, Key: key, Attempts: attempts, Err: err}
}

// classify maps an attempt's error to the walstore sentinel it means. This
// is the one place the mapping lives; doc.go has it as a table. Anything
// it cannot identify as a refusal is transient: a misbehaving answer is
// retried, never taken for a permanent verdict.
func classify(op string, err error) error {
	var rangeErr *rangeError
	if errors.As(err, &rangeErr) {
		return rangeErr.kind
	}
	if errors.Is(err, gcs.ErrBucketNotExist) {
		return storage.ErrPermanent
	}
	if errors.Is(err, gcs.ErrObjectNotExist) {
		return notFound(op)
	}
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) {
		return classifyStatus(op, apiErr.Code)
	}
	if st, ok := grpcStatus(err); ok {
		return classifyCode(op, st.Code())
	}
	return storage.ErrUnavailable
}

// notFound is what a missing object or bucket means to op: for a read or
// a delete the object is not there; a write or a listing that finds
// nothing found no bucket, which needs an operator.
func notFound(op string) error {
	if op == "Put" || op == "List" {
		return storage.ErrPermanent
	}
	return storage.ErrNotFound
}

// classifyStatus maps an HTTP status of the JSON or XML API.
func classifyStatus(op string, code int) error {
	switch {
	case code == 404:
		return notFound(op)
	case code == 412 && op == "Put":
		// ifGenerationMatch=0 is only ever sent with Put.
		return storage.ErrAlreadyExists
	case code == 416:
		return storage.ErrInvalidRange
	case code == 408, code == 429, code == 409:
		// A timeout, throttling, or a conflict with a concurrent
		// request for the same object that a later attempt sees
		// settled.
		return storage.ErrUnavailable
	case code == 501:
		// Not implemented: no retry will change that (RFC 9110, 15.6.2).
		return storage.ErrPermanent
	case code >= 500:
		return storage.ErrUnavailable
	case code >= 400:
		return storage.ErrPermanent
	}
	// A success whose body failed: an answer cut short.
	return storage.ErrUnavailable
}

// classifyCode maps a gRPC status, as the gRPC client (zonal buckets)
// reports failures.
func classifyCode(op string, code codes.Code) error {
	switch code {
	case codes.NotFound:
		return notFound(op)
	case codes.FailedPrecondition:
		if op == "Put" {
			return storage.ErrAlreadyExists
		}
		return storage.ErrPermanent
	case codes.OutOfRange:
		return storage.ErrInvalidRange
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.Unimplemented, codes.AlreadyExists:
		return storage.ErrPermanent
	}
	return storage.ErrUnavailable
}

// grpcStatus finds a gRPC status in err, if the gRPC client produced it.
func grpcStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil, false
	}
	st := se.GRPCStatus()
	return st, st != nil && st.Code() != codes.OK && st.Code() != codes.Unknown
}

// refused reports whether err is a complete answer refusing the request
// (a 4xx status other than a timeout, a conflict or throttling), after
// which the request had no effect.
func refused(err error) bool {
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case 408, 409, 429:
			return false
		}
		return apiErr.Code >= 400 && apiErr.Code < 500
	}
	if st, ok := grpcStatus(err); ok {
		switch st.Code() {
		case codes.NotFound, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.OutOfRange:
			return true
		}
	}
	return false
}

// errAttemptTimeout is the cause of an attempt's context when the store's
// RequestTimeout, not the caller, ended it.
var errAttemptTimeout = errors.New("gcsstore: attempt timed out (Options.RequestTimeout)")

// rangeError is a read answer that does not hold the requested range, and
// the walstore sentinel it means.
type rangeError struct {
	kind error
	err  error
}

func (e *rangeError) Error() string { return e.err.Error() }
func (e *rangeError) Unwrap() error { return e.err }
