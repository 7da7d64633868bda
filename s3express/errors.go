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
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/activetier/activetier/internal/storeutil"
	"github.com/activetier/activetier/storage"
)

// ErrInvalidKey is returned, before any request is made, for an object key
// S3 cannot store or delete: empty, not valid UTF-8, longer than 1024 bytes
// once Options.KeyPrefix is added, holding a control character (which the
// XML of a DeleteObjects request cannot carry, so one such key would fail
// its whole batch), or, in a directory bucket, made only of whitespace.
var ErrInvalidKey = errors.New("s3express: invalid object key")

// Error is the error every Store method returns for a failed operation. It
// names the operation and the object, matches the walstore sentinel it was
// classified as (Kind) under errors.Is, and keeps the SDK's error (Err) so
// that errors.As still finds *awshttp.ResponseError, smithy.APIError and the
// like. RequestID is the S3 request id to quote to AWS support.
type Error struct {
	// Op is the Store method: "Put", "GetRange", "ReadRange", "Delete" or
	// "List".
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
	// ErrAlreadyExists, ErrUnavailable, ErrInvalidRange, ErrUnknownBucket,
	// ErrPermanent for refusals that need an operator: access denied, a
	// missing bucket, 501 Not Implemented), ErrInvalidKey, or nil for an
	// error of the caller's context or one the store cannot place.
	Kind error
	// Err is the underlying error.
	Err error
}

// Error formats the error as "s3express: Op bucket/key: kind: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(storeutil.ErrorText("s3express", e.Op, e.Bucket, e.Key, e.Kind, e.Err))
	if e.RequestID != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), e.RequestID)) {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns Kind and Err, so errors.Is and errors.As see both.
func (e *Error) Unwrap() []error { return storeutil.KindAndCause(e.Kind, e.Err) }

// requestError wraps an error returned by the SDK for one operation,
// classifying it. ctx is the caller's: when it is done, the error is the
// caller's cancellation or deadline, not a failure of the store: it is left
// unclassified and wraps ctx.Err(), whatever the SDK reported, so that
// errors.Is(err, context.Canceled) (or DeadlineExceeded) is the only thing
// it matches. An attempt timeout (Options.RequestTimeout) is the store's
// failure and never matches context.DeadlineExceeded: see storeutil.HideContextErr.
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
	switch ctxErr := ctx.Err(); {
	case ctxErr != nil && !errors.Is(err, ctxErr):
		e.Err = fmt.Errorf("%w (the last attempt: %w)", ctxErr, storeutil.HideContextErr(err))
	case ctxErr != nil:
	default:
		e.Kind = classify(op, err)
		if e.Kind == storage.ErrUnavailable {
			e.Err = storeutil.HideContextErr(err)
		}
	}
	return e
}

// classify maps an SDK error to the walstore sentinel it means, or nil.
// This is the one place the mapping lives; doc.go has it as a table.
func classify(op string, err error) error {
	var rangeErr *rangeError
	if errors.As(err, &rangeErr) {
		// GetRange's check of the answer, within an attempt.
		return rangeErr.kind
	}
	var incomplete incompleteAnswer
	if errors.As(err, &incomplete) {
		return storage.ErrUnavailable
	}
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
		// A precondition is only ever sent with Put (If-None-Match: *):
		// elsewhere a 412 is a refusal the store cannot explain.
		if kind == storage.ErrAlreadyExists && op != "Put" {
			return storage.ErrPermanent
		}
		return kind
	}
	switch {
	case status == 404 && code == "":
		// A 404 without an error body (HEAD, some proxies).
		return storage.ErrNotFound
	case status == 412 && op == "Put":
		return storage.ErrAlreadyExists
	case status == 416:
		return storage.ErrInvalidRange
	case status == 501:
		// Not Implemented is permanent (AWS's error responses; the SDK
		// retries only 500, 502, 503 and 504): retrying a request the
		// server does not implement would retry forever.
		return storage.ErrPermanent
	case status == 408 || status == 409 || status == 429 || status >= 500:
		return storage.ErrUnavailable
	case status >= 400:
		// A refusal: access denied, a missing bucket, a request the
		// server calls malformed. Retrying changes nothing.
		return storage.ErrPermanent
	case status >= 200 && status < 300:
		// A success whose body ended early or could not be decoded:
		// an answer cut short, not a refusal.
		return storage.ErrUnavailable
	case status != 0:
		return nil
	}
	// No HTTP response: the request never got an answer.
	if isTransportError(err) {
		return storage.ErrUnavailable
	}
	return nil
}

// classifyCode maps an S3 error code, as found in an error response or in
// a DeleteObjects per-key error, to a sentinel.
func classifyCode(code string) error {
	switch code {
	case "NoSuchKey", "NotFound":
		return storage.ErrNotFound
	case "PreconditionFailed":
		return storage.ErrAlreadyExists
	case "InvalidRange":
		return storage.ErrInvalidRange
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "ThrottlingException",
		"TooManyRequestsException", "RequestLimitExceeded", "BandwidthLimitExceeded",
		// Another conditional write of the same key was in flight and the
		// SDK's retries ran out before it settled: the outcome is unknown
		// until a later attempt sees the key taken or free.
		"ConditionalRequestConflict":
		return storage.ErrUnavailable
	case "AccessDenied", "AllAccessDisabled", "NoSuchBucket", "NotImplemented", "InvalidArgument", "InvalidRequest",
		"MethodNotAllowed", "InvalidAccessKeyId", "SignatureDoesNotMatch", "MalformedXML", "InvalidBucketName",
		"KMS.DisabledException", "KMS.NotFoundException", "KMS.KMSInvalidStateException":
		// Refusals an operator must act on; also reported per key by
		// DeleteObjects, where there is no status to go by.
		return storage.ErrPermanent
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
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// A context error here is an attempt's, not the caller's:
		// requestError has checked the caller's context.
		return true
	}
	return false
}

// refused reports whether err is a complete answer refusing the request
// (a 4xx status other than a timeout, a conflict or throttling, or 501 Not
// Implemented), after which the request had no effect.
func refused(err error) bool {
	var respErr *smithyhttp.ResponseError
	if !errors.As(err, &respErr) {
		return false
	}
	switch status := respErr.HTTPStatusCode(); status {
	case 408, 409, 429:
		return false
	default:
		return status >= 400 && status < 500 || status == 501
	}
}

// incompleteAnswer marks the error of an attempt whose answer arrived in
// part: a 2xx status whose body ended early, disagreed with its headers
// or could not be decoded. The SDK retries it (RetryableError), which it
// does not do by itself for a body that fails after a 2xx status, and it is
// storage.ErrUnavailable once retries run out.
type incompleteAnswer struct{ err error }

func (e incompleteAnswer) Error() string        { return e.err.Error() }
func (e incompleteAnswer) Unwrap() error        { return e.err }
func (e incompleteAnswer) RetryableError() bool { return true }

// retryIncompleteAnswers is an API option that marks incomplete answers
// (see incompleteAnswer) for the retryer. It sits first in the deserialize
// step, inside the retry loop, where it sees the deserializer's error.
func retryIncompleteAnswers(st *middleware.Stack) error {
	return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("activetierRetryIncompleteAnswers",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err != nil && ctx.Err() == nil && successStatus(out.RawResponse, err) {
				err = incompleteAnswer{err}
			}
			return out, md, err
		}), middleware.Before)
}

// successStatus reports whether the attempt's answer had a 2xx status.
func successStatus(raw any, err error) bool {
	if resp, ok := raw.(*smithyhttp.Response); ok && resp != nil {
		return resp.StatusCode >= 200 && resp.StatusCode < 300
	}
	var respErr *smithyhttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 200 && respErr.HTTPStatusCode() < 300
}
