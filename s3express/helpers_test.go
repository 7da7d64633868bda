package s3express_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/s3express"
)

// Bucket names the canned-response tests configure: three directory
// buckets standing for three AZs, and a standard one.
const (
	azA, azB, azC = "use1-az4", "use1-az5", "use1-az6"
	bucketA       = "walrus--use1-az4--x-s3"
	bucketB       = "walrus--use1-az5--x-s3"
	bucketC       = "walrus--use1-az6--x-s3"
)

func threeBuckets() map[string]string {
	return map[string]string{azA: bucketA, azB: bucketB, azC: bucketC}
}

// canned is a response the fake server gives.
type canned struct {
	status int
	header map[string]string
	body   string
	// hangUp closes the connection without answering.
	hangUp bool
	// short declares Content-Length len(body)+short but sends only body.
	short int
}

// s3Error is an S3 error document with its request id header.
func s3Error(status int, code, requestID string) canned {
	return canned{
		status: status,
		header: map[string]string{"x-amz-request-id": requestID, "Content-Type": "application/xml"},
		body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>canned ` + code +
			`</Message><RequestId>` + requestID + `</RequestId><HostId>host</HostId></Error>`,
	}
}

var ok200 = canned{status: 200}

// seenRequest is what the fake server recorded of one request.
type seenRequest struct {
	method, path, rawQuery string
	header                 http.Header
	body                   []byte
}

// fakeS3 answers requests with a script of canned responses, the last one
// repeated, and records what it was sent.
type fakeS3 struct {
	*httptest.Server
	mu      sync.Mutex
	script  []canned
	handler func(w http.ResponseWriter, r *http.Request) bool
	seen    []seenRequest
}

func newFakeS3(t *testing.T, script ...canned) *fakeS3 {
	f := &fakeS3{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeS3) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
	handler := f.handler
	var c canned
	if len(f.script) > 0 {
		c = f.script[0]
		if len(f.script) > 1 {
			f.script = f.script[1:]
		}
	}
	f.mu.Unlock()
	if handler != nil && handler(w, r) {
		return
	}
	if c.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range c.header {
		w.Header().Set(k, v)
	}
	if c.short > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(c.body)+c.short))
	}
	w.WriteHeader(c.status)
	io.WriteString(w, c.body)
}

func (f *fakeS3) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// testConfig is an aws.Config for a local endpoint with static test
// credentials and a retryer that does not sleep, so that retries of
// canned failures are quick. It keeps the SDK's standard retry decisions
// and its default of three attempts.
func testConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test-key", "test-secret", ""),
		BaseEndpoint: aws.String(endpoint),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = noBackoff{}
				o.RateLimiter = ratelimit.None
			})
		},
	}
}

type noBackoff struct{}

func (noBackoff) BackoffDelay(int, error) (time.Duration, error) { return 0, nil }

// newFakeStore returns a store in azA over the fake server, in
// compatibility mode with the three directory buckets.
func newFakeStore(t *testing.T, f *fakeS3, mod func(*s3express.Options)) *s3express.Store {
	t.Helper()
	opts := s3express.Options{Buckets: threeBuckets(), LocalAZ: azA, S3Compatible: true}
	if mod != nil {
		mod(&opts)
	}
	s, err := s3express.New(testConfig(f.URL), opts)
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

// countRequests adds a middleware that counts every HTTP attempt the
// client is about to send, retries included.
func countRequests(n *atomic.Int64) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("countRequests",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					n.Add(1)
					return next.HandleDeserialize(ctx, in)
				}), middleware.After)
		})
	}
}

// clientFunc is an HTTP client that never reaches a network.
type clientFunc func(*http.Request) (*http.Response, error)

func (f clientFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// requireKind asserts err matches exactly one of the sentinels in want's
// family (or none, for want nil).
func requireKind(t *testing.T, err error, want error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	for _, k := range allKinds {
		if k == want {
			require.ErrorIs(t, err, k, msg)
		} else {
			require.False(t, errors.Is(err, k), "%s: error %q must not match %v", msg, err, k)
		}
	}
}
