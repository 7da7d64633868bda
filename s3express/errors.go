package s3express

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/activetier/activetier/walstore"
)

// ErrInvalidKey is returned, before any request is made, for an object key
// S3 cannot store: empty, not valid UTF-8, or longer than 1024 bytes once
// Options.KeyPrefix is added.
var ErrInvalidKey = errors.New("s3express: invalid object key")

// Error is the error every Store method returns for a failed operation. It
// names the operation and the object, matches the walstore sentinel it was
// classified as (Kind) under errors.Is, and keeps the SDK's error (Err) so
// that errors.As still finds *awshttp.ResponseError, smithy.APIError and the
// like. RequestID is the S3 request id to quote to AWS support.
type Error struct {
	// Op is the Store method: "Put", "GetRange", "Delete" or "List".
	Op string
	// Bucket and Key name the object as the caller did (Key without
	// Options.KeyPrefix); Key is the listed prefix for List.
	Bucket, Key string
	// Code is the S3 error code ("NoSuchKey", "SlowDown", ...), if the
	// server answered with one.
	Code string
	// RequestID is the x-amz-request-id of the failed response, if any.
	RequestID string
	// Kind is the walstore sentinel the error matches (ErrNotFound,
	// ErrAlreadyExists, ErrUnavailable, ErrInvalidRange, ErrUnknownBucket),
	// ErrInvalidKey, or nil for errors that need an operator (access
	// denied, missing bucket, bad configuration).
	Kind error
	// Err is the underlying error.
	Err error
}

// Error formats the error as "s3express: Op bucket/key: kind: cause".
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s3express: %s %s/%s", e.Op, e.Bucket, e.Key)
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(e.Kind.Error())
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.RequestID != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), e.RequestID)) {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns Kind and Err, so errors.Is and errors.As see both.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// requestError wraps an error returned by the SDK for one operation,
// classifying it. ctx is the caller's: when it is done, the error is the
// caller's cancellation or deadline, not a failure of the store, and is
// left unclassified so that errors.Is(err, context.Canceled) is the only
// thing it matches.
func requestError(ctx context.Context, op, bucket, key string, err error) *Error {
	e := &Error{Op: op, Bucket: bucket, Key: key, Err: err}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		e.Code = apiErr.ErrorCode()
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		e.RequestID = respErr.ServiceRequestID()
	}
	if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		e.Kind = classify(op, err)
	}
	return e
}

// classify maps an SDK error to the walstore sentinel it means, or nil.
// This is the one place the mapping lives; doc.go has it as a table.
func classify(op string, err error) error {
	var status int
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	code := ""
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	if kind := classifyCode(code); kind != nil {
		// A precondition is only ever sent with Put (If-None-Match: *).
		if kind == walstore.ErrAlreadyExists && op != "Put" {
			return nil
		}
		return kind
	}
	switch {
	case status == 404 && code == "":
		// A 404 without an error body (HEAD, some proxies).
		return walstore.ErrNotFound
	case status == 412 && op == "Put":
		return walstore.ErrAlreadyExists
	case status == 416:
		return walstore.ErrInvalidRange
	case status == 429 || status >= 500:
		return walstore.ErrUnavailable
	case status != 0:
		return nil
	}
	// No HTTP response: the request never got an answer.
	if isTransportError(err) {
		return walstore.ErrUnavailable
	}
	return nil
}

// classifyCode maps an S3 error code, as found in an error response or in
// a DeleteObjects per-key error, to a sentinel.
func classifyCode(code string) error {
	switch code {
	case "NoSuchKey", "NotFound":
		return walstore.ErrNotFound
	case "PreconditionFailed":
		return walstore.ErrAlreadyExists
	case "InvalidRange":
		return walstore.ErrInvalidRange
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "ThrottlingException",
		"TooManyRequestsException", "RequestLimitExceeded", "BandwidthLimitExceeded",
		// Another conditional write of the same key was in flight and the
		// SDK's retries ran out before it settled: the outcome is unknown
		// until a later attempt sees the key taken or free.
		"ConditionalRequestConflict":
		return walstore.ErrUnavailable
	}
	return nil
}

// isTransportError reports whether err means the request got no complete
// answer: connection refused or reset, DNS failure, timeouts, a body cut
// short. The SDK has already retried these.
func isTransportError(err error) bool {
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	var dnsErr *net.DNSError
	var timeoutErr interface{ Timeout() bool }
	switch {
	case errors.As(err, &sendErr), errors.As(err, &netErr), errors.As(err, &dnsErr):
		return true
	case errors.As(err, &timeoutErr) && timeoutErr.Timeout():
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		// DeadlineExceeded here is a per-attempt timeout, not the caller's
		// deadline: requestError has checked the caller's context.
		return true
	}
	return false
}

// neverSent reports whether err is a failure to reach the server at all
// (name resolution, connecting), after which a request cannot have had
// any effect.
func neverSent(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) && opErr.Op == "dial"
}
