package s3express_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// allKinds are the sentinels an error may be classified as.
var allKinds = []error{
	storage.ErrNotFound, storage.ErrAlreadyExists, storage.ErrUnavailable,
	storage.ErrInvalidRange, storage.ErrUnknownBucket, storage.ErrPermanent, s3express.ErrInvalidKey,
}

// The SDK's standard retryer makes three attempts; the store keeps that.
const attempts = 3

func TestPutErrorMapping(t *testing.T) {
	const payload = "payload"
	stored := func(body string) canned { return canned{status: 200, body: body} }
	hangUp := canned{hangUp: true}
	cases := []struct {
		name     string
		script   []canned // the Put's attempts, then the read-back GETs if any
		ok       bool
		want     error
		code     string
		requests int
	}{
		{"stored", []canned{ok200}, true, nil, "", 1},
		{"key taken", []canned{s3Error(412, "PreconditionFailed", "req-412")}, false, storage.ErrAlreadyExists, "PreconditionFailed", 1},
		{"conflict retried then stored", []canned{s3Error(409, "ConditionalRequestConflict", "req-409"), ok200}, true, nil, "", 2},
		{"conflict retried then taken", []canned{s3Error(409, "ConditionalRequestConflict", "req-409"), s3Error(412, "PreconditionFailed", "req-412"), stored("theirs")}, false, storage.ErrAlreadyExists, "PreconditionFailed", 3},
		// Every attempt failed in a way that may have stored the
		// object, and so does every attempt of the read-back.
		{"conflict until retries run out", []canned{s3Error(409, "ConditionalRequestConflict", "req-409")}, false, storage.ErrUnavailable, "ConditionalRequestConflict", 2 * attempts},
		{"slow down", []canned{s3Error(503, "SlowDown", "req-503")}, false, storage.ErrUnavailable, "SlowDown", 2 * attempts},
		{"slow down then stored", []canned{s3Error(503, "SlowDown", "req-503"), ok200}, true, nil, "", 2},
		{"internal error", []canned{s3Error(500, "InternalError", "req-500")}, false, storage.ErrUnavailable, "InternalError", 2 * attempts},
		{"bad gateway without body", []canned{{status: 502}}, false, storage.ErrUnavailable, "BadGateway", 2 * attempts},
		// Refusals an operator must act on: one request, no read-back,
		// and a sentinel of their own, so that the engines can report
		// them rather than retry forever.
		{"access denied", []canned{s3Error(403, "AccessDenied", "req-403")}, false, storage.ErrPermanent, "AccessDenied", 1},
		{"no such bucket", []canned{s3Error(404, "NoSuchBucket", "req-404")}, false, storage.ErrPermanent, "NoSuchBucket", 1},
		{"not implemented", []canned{s3Error(501, "NotImplemented", "req-501")}, false, storage.ErrPermanent, "NotImplemented", 1},
		{"not implemented without body", []canned{{status: 501}}, false, storage.ErrPermanent, "NotImplemented", 1},
		{"bad request", []canned{s3Error(400, "InvalidRequest", "req-400")}, false, storage.ErrPermanent, "InvalidRequest", 1},
		{"encryption headers refused", []canned{s3Error(400, "InvalidArgument", "req-400")}, false, storage.ErrPermanent, "InvalidArgument", 1},
		{"connection closed", []canned{hangUp}, false, storage.ErrUnavailable, "", 2 * attempts},
		// A success whose answer was cut short: it is retried, and the
		// retry finds the key taken by the first attempt.
		{"success cut short", []canned{{status: 200, short: 10}, s3Error(412, "PreconditionFailed", "req-412"), stored(payload)}, true, nil, "", 3},
		{"success cut short, read-back cut short", []canned{{status: 200, short: 10}, s3Error(412, "PreconditionFailed", "req-412"), {status: 200, body: "pay", short: 4}, stored(payload)}, true, nil, "", 4},
		// The read-back is retried like any GET.
		{"no answer, read-back retried", []canned{hangUp, hangUp, hangUp, s3Error(503, "SlowDown", "req-503"), stored(payload)}, true, nil, "", attempts + 2},
		// A lost answer: the first attempt stored the object, its retry
		// finds the key taken. The read-back recognises the body.
		{"retry finds its own object", []canned{s3Error(500, "InternalError", "req-500"), s3Error(412, "PreconditionFailed", "req-412"), stored(payload)}, true, nil, "", 3},
		{"retry finds another object", []canned{s3Error(500, "InternalError", "req-500"), s3Error(412, "PreconditionFailed", "req-412"), stored("payloaX")}, false, storage.ErrAlreadyExists, "PreconditionFailed", 3},
		{"no answer, own object stored", []canned{hangUp, hangUp, hangUp, stored(payload)}, true, nil, "", attempts + 1},
		{"no answer, another object stored", []canned{hangUp, hangUp, hangUp, stored("a longer body")}, false, storage.ErrAlreadyExists, "", attempts + 1},
		{"no answer, nothing stored", []canned{hangUp, hangUp, hangUp, s3Error(404, "NoSuchKey", "req-404")}, false, storage.ErrUnavailable, "", attempts + 1},
		// A read-back whose Content-Length is wrong proves nothing: only
		// the bytes tell another object from this Put's own.
		{"read-back Content-Length one short", []canned{hangUp, hangUp, hangUp, {status: 200, header: map[string]string{"Content-Length": "6"}, body: "payloa"}, stored(payload)}, true, nil, "", attempts + 2},
		{"read-back of a prefix of the body", []canned{hangUp, hangUp, hangUp, stored("payl")}, false, storage.ErrUnavailable, "", 2 * attempts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeS3(t, c.script...)
			s := newFakeStore(t, f, nil)
			ref, err := s.Put(t.Context(), "obj/1", []byte(payload))
			reqs := f.requests()
			assert.Len(t, reqs, c.requests, "HTTP requests")
			for i, r := range reqs {
				if i >= attempts || r.method == http.MethodGet {
					assert.Equal(t, http.MethodGet, r.method, "request %d: only the read-back follows the attempts", i)
					assert.Empty(t, r.header.Get("Range"), "the read-back reads the whole object")
				}
			}
			if c.ok {
				require.NoError(t, err)
				assert.Equal(t, metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: "obj/1"}, ref)
				return
			}
			requireKind(t, err, c.want, "Put")
			var se *s3express.Error
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "Put", se.Op)
			assert.Equal(t, bucketA, se.Bucket)
			assert.Equal(t, "obj/1", se.Key)
			assert.Equal(t, c.code, se.Code)
			assert.Contains(t, err.Error(), bucketA+"/obj/1", "the error names bucket and key")
			if c.code != "" {
				var re *awshttp.ResponseError
				require.ErrorAs(t, err, &re, "the SDK's response error stays reachable")
				assert.Equal(t, re.ServiceRequestID(), se.RequestID)
				if id := c.script[0].header["x-amz-request-id"]; id != "" && len(c.script) == 1 {
					assert.Equal(t, id, se.RequestID)
					assert.Contains(t, err.Error(), id)
				}
			}
		})
	}
}

func TestGetRangeErrorMapping(t *testing.T) {
	partial := func(cr, body string, short int) canned {
		return canned{status: 206, header: map[string]string{"Content-Range": cr}, body: body, short: short}
	}
	cases := []struct {
		name     string
		script   []canned
		want     error
		requests int
	}{
		{"no such key", []canned{s3Error(404, "NoSuchKey", "req-404")}, storage.ErrNotFound, 1},
		{"404 without a body", []canned{{status: 404}}, storage.ErrNotFound, 1},
		{"range not satisfiable", []canned{s3Error(416, "InvalidRange", "req-416")}, storage.ErrInvalidRange, 1},
		{"range cut at the object's end", []canned{partial("bytes 5-9/10", "56789", 0)}, storage.ErrInvalidRange, 1},
		// Answers that disagree with the request are attempt failures,
		// retried like a 503.
		{"body cut short", []canned{partial("bytes 5-14/100", "56789", 5)}, storage.ErrUnavailable, attempts},
		{"body cut short once", []canned{partial("bytes 5-14/100", "56789", 5), partial("bytes 5-14/100", "56789abcde", 0)}, nil, 2},
		{"Content-Length disagrees with Content-Range", []canned{{status: 206, header: map[string]string{"Content-Range": "bytes 5-14/100", "Content-Length": "9"}, body: "56789abcd"}}, storage.ErrUnavailable, attempts},
		{"slow down", []canned{s3Error(503, "SlowDown", "req-503")}, storage.ErrUnavailable, attempts},
		{"connection closed", []canned{{hangUp: true}}, storage.ErrUnavailable, attempts},
		{"precondition on a GET is not a taken key", []canned{s3Error(412, "PreconditionFailed", "req-412")}, storage.ErrPermanent, 1},
		{"not implemented", []canned{s3Error(501, "NotImplemented", "req-501")}, storage.ErrPermanent, 1},
		{"access denied", []canned{s3Error(403, "AccessDenied", "req-403")}, storage.ErrPermanent, 1},
		{"range ignored", []canned{{status: 200, body: strings.Repeat("x", 100)}}, storage.ErrUnavailable, attempts},
		{"other range returned", []canned{partial("bytes 0-9/100", "0123456789", 0)}, storage.ErrUnavailable, attempts},
		{"malformed Content-Range", []canned{partial("bytes five-nine/10", "0123456789", 0)}, storage.ErrUnavailable, attempts},
	}
	for _, c := range cases {
		for _, read := range rangeReads {
			t.Run(read.name+"/"+c.name, func(t *testing.T) {
				f := newFakeS3(t, c.script...)
				s := newFakeStore(t, f, nil)
				ref := metadata.ObjectRef{AZ: azB, Bucket: bucketB, Key: "obj/2"}
				got, err := read.fn(t.Context(), s, ref, 5, 10)
				assert.Len(t, f.requests(), c.requests, "HTTP attempts")
				if c.want == nil && len(c.script) > 1 {
					require.NoError(t, err)
					assert.Equal(t, "56789abcde", string(got))
					return
				}
				assert.Nil(t, got)
				requireKind(t, err, c.want, read.name)
				assert.Contains(t, err.Error(), bucketB+"/obj/2")
			})
		}
	}
}

// rangeReads are GetRange and ReadRange as functions of the same
// arguments, for tests that hold both to the same answers.
var rangeReads = []struct {
	name string
	fn   func(ctx context.Context, s *s3express.Store, ref metadata.ObjectRef, offset, length int64) ([]byte, error)
}{
	{"GetRange", func(ctx context.Context, s *s3express.Store, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
		return s.GetRange(ctx, ref, offset, length)
	}},
	{"ReadRange", func(ctx context.Context, s *s3express.Store, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
		return storagetest.CheckedReadRange(ctx, s, ref, offset, int(length))
	}},
}

func TestGetRangeRequest(t *testing.T) {
	f := newFakeS3(t, canned{status: 206, header: map[string]string{"Content-Range": "bytes 5-14/100"}, body: "0123456789"})
	s := newFakeStore(t, f, func(o *s3express.Options) { o.KeyPrefix = "deploy/" })
	got, err := s.GetRange(t.Context(), metadata.ObjectRef{AZ: azC, Bucket: bucketC, Key: "obj 3"}, 5, 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(got))
	reqs := f.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, http.MethodGet, reqs[0].method)
	assert.Equal(t, "/"+bucketC+"/deploy/obj 3", reqs[0].path, "path-style, key prefix added")
	assert.Equal(t, "bytes=5-14", reqs[0].header.Get("Range"))
}

func TestPutRequest(t *testing.T) {
	big := bytes.Repeat([]byte("z"), 3<<20) // above the SDK's 100-continue threshold
	cases := []struct {
		name   string
		mod    func(*s3express.Options)
		header map[string]string // "" value: header must be absent
	}{
		// No encryption header unless asked for: a directory bucket
		// refuses every PUT whose header differs from its default.
		{"defaults", nil, map[string]string{
			"If-None-Match":                "*",
			"X-Amz-Server-Side-Encryption": "",
			"X-Amz-Checksum-Crc32":         "-",
			"Expect":                       "100-continue",
		}},
		{"sse-s3", func(o *s3express.Options) { o.SSE = s3express.SSES3 },
			map[string]string{"X-Amz-Server-Side-Encryption": "AES256"}},
		{"crc32c and kms", func(o *s3express.Options) {
			o.Checksum = "CRC32C"
			o.SSE = s3express.SSEKMS
			o.KMSKeyID = "arn:aws:kms:us-east-1:111122223333:key/k"
		}, map[string]string{
			"X-Amz-Checksum-Crc32c":                           "-",
			"X-Amz-Checksum-Crc32":                            "",
			"X-Amz-Server-Side-Encryption":                    "aws:kms",
			"X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id":     "arn:aws:kms:us-east-1:111122223333:key/k",
			"X-Amz-Server-Side-Encryption-Bucket-Key-Enabled": "true",
		}},
		{"bucket default encryption", func(o *s3express.Options) { o.SSE = s3express.SSEBucketDefault },
			map[string]string{"X-Amz-Server-Side-Encryption": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeS3(t, ok200)
			s := newFakeStore(t, f, func(o *s3express.Options) {
				o.KeyPrefix = "deploy/"
				if c.mod != nil {
					c.mod(o)
				}
			})
			ref, err := s.Put(t.Context(), "seg/0001", big)
			require.NoError(t, err)
			assert.Equal(t, metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: "seg/0001"}, ref, "the ref carries the key without the prefix")
			reqs := f.requests()
			require.Len(t, reqs, 1)
			r := reqs[0]
			assert.Equal(t, http.MethodPut, r.method)
			assert.Equal(t, "/"+bucketA+"/deploy/seg/0001", r.path)
			assert.Equal(t, big, r.body, "the server received the body")
			for k, v := range c.header {
				switch v {
				case "":
					assert.Empty(t, r.header.Values(k), "header %s must be absent", k)
				case "-":
					assert.NotEmpty(t, r.header.Get(k), "header %s must be present", k)
				default:
					assert.Equal(t, v, r.header.Get(k), "header %s", k)
				}
			}
		})
	}
}

func TestDeleteBatchesAndPerKeyErrors(t *testing.T) {
	f := newFakeS3(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.URL.Path, "/"+bucketB) {
			return false
		}
		// The first batch of bucket B reports three per-key results.
		w.Header().Set("x-amz-request-id", "req-del")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult>`+
			`<Error><Key>p/gone</Key><Code>NoSuchKey</Code><Message>missing</Message></Error>`+
			`<Error><Key>p/slow</Key><Code>SlowDown</Code><Message>reduce your request rate</Message></Error>`+
			`<Error><Key>p/denied</Key><Code>AccessDenied</Code><Message>denied</Message></Error>`+
			`</DeleteResult>`)
		return true
	}
	f.script = []canned{{status: 200, body: `<DeleteResult></DeleteResult>`}}
	s := newFakeStore(t, f, func(o *s3express.Options) { o.KeyPrefix = "p/" })

	var refs []metadata.ObjectRef
	for i := range 2500 {
		refs = append(refs, metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: fmt.Sprintf("k%04d", i)})
	}
	refs = append(refs, refs[0]) // named twice, deleted once
	for _, k := range []string{"gone", "slow", "denied"} {
		refs = append(refs, metadata.ObjectRef{AZ: azB, Bucket: bucketB, Key: k})
	}
	err := s.Delete(t.Context(), refs)

	reqs := f.requests()
	require.Len(t, reqs, 4, "bucket A in batches of 1000, 1000, 500; bucket B in one")
	var keysPerRequest []int
	for _, r := range reqs {
		assert.Equal(t, http.MethodPost, r.method)
		assert.Contains(t, r.rawQuery, "delete")
		assert.Contains(t, string(r.body), "<Quiet>true</Quiet>")
		keysPerRequest = append(keysPerRequest, strings.Count(string(r.body), "<Key>"))
	}
	assert.Equal(t, []int{1000, 1000, 500, 3}, keysPerRequest)
	assert.Contains(t, string(reqs[0].body), "<Key>p/k0000</Key>", "keys carry the prefix on the wire")

	require.Error(t, err)
	assert.ErrorIs(t, err, storage.ErrUnavailable, "SlowDown for one key")
	assert.NotErrorIs(t, err, storage.ErrNotFound, "a missing key is not an error")
	assert.Contains(t, err.Error(), bucketB+"/slow")
	assert.Contains(t, err.Error(), bucketB+"/denied")
	assert.NotContains(t, err.Error(), "gone")
	assert.Contains(t, err.Error(), "req-del")
}

func TestDeleteRequestFailureStopsOnlyItsBucket(t *testing.T) {
	f := newFakeS3(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/"+bucketA) {
			w.WriteHeader(503)
			return true
		}
		fmt.Fprint(w, `<DeleteResult></DeleteResult>`)
		return true
	}
	s := newFakeStore(t, f, nil)
	var refs []metadata.ObjectRef
	for i := range 1500 {
		refs = append(refs, metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: fmt.Sprintf("a%d", i)})
	}
	refs = append(refs, metadata.ObjectRef{AZ: azC, Bucket: bucketC, Key: "c"})
	err := s.Delete(t.Context(), refs)
	requireKind(t, err, storage.ErrUnavailable, "Delete")
	var toA, toC int
	for _, r := range f.requests() {
		switch {
		case strings.HasPrefix(r.path, "/"+bucketA):
			toA++
		case strings.HasPrefix(r.path, "/"+bucketC):
			toC++
		}
	}
	assert.Equal(t, attempts, toA, "bucket A's first batch is retried, its second never sent")
	assert.Equal(t, 1, toC, "bucket C is still cleaned up")
}

func TestListPaginatesUnsortedAndFiltersDirectoryPrefixes(t *testing.T) {
	page := func(token string, keys ...string) string {
		var b strings.Builder
		b.WriteString(`<ListBucketResult>`)
		for _, k := range keys {
			fmt.Fprintf(&b, `<Contents><Key>%s</Key><Size>%d</Size><LastModified>2025-01-02T03:04:05.000Z</LastModified></Contents>`, k, len(k))
		}
		if token != "" {
			fmt.Fprintf(&b, `<IsTruncated>true</IsTruncated><NextContinuationToken>%s</NextContinuationToken>`, token)
		}
		b.WriteString(`</ListBucketResult>`)
		return b.String()
	}
	f := newFakeS3(t,
		canned{status: 200, body: page("t1", "p/list/sub/c", "p/list/a", "p/list/zz")},
		canned{status: 200, body: page("", "p/list/sb", "p/list/s")},
	)
	s := newFakeStore(t, f, func(o *s3express.Options) { o.KeyPrefix = "p/" })
	infos, err := s.List(t.Context(), bucketB, "list/s")
	require.NoError(t, err)
	var keys []string
	for _, info := range infos {
		keys = append(keys, info.Ref.Key)
		assert.Equal(t, azB, info.Ref.AZ)
		assert.Equal(t, bucketB, info.Ref.Bucket)
		assert.Equal(t, int64(len("p/"+info.Ref.Key)), info.Size)
		assert.Equal(t, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), info.LastModified)
	}
	assert.ElementsMatch(t, []string{"list/sub/c", "list/sb", "list/s"}, keys)

	reqs := f.requests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[0].rawQuery, "prefix=p%2Flist%2F", "a directory bucket is listed from the prefix's last /")
	assert.Contains(t, reqs[1].rawQuery, "continuation-token=t1")
}

func TestListStandardBucketSendsWholePrefix(t *testing.T) {
	f := newFakeS3(t, canned{status: 200, body: `<ListBucketResult></ListBucketResult>`})
	s, err := s3express.New(testConfig(f.URL), s3express.Options{
		Buckets: map[string]string{"a": "std-bucket-a", "b": "std-bucket-b"}, LocalAZ: "a", S3Compatible: true,
	})
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)
	infos, err := s.List(t.Context(), "std-bucket-b", "list/s")
	require.NoError(t, err)
	assert.Empty(t, infos)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	assert.Contains(t, reqs[0].rawQuery, "prefix=list%2Fs")
}

func TestTransportFailures(t *testing.T) {
	const host = "walrus--use1-az4--x-s3.s3express-use1-az4.us-east-1.amazonaws.com"
	cases := []struct {
		name     string
		err      error
		attempts int
		// readBack is the attempts of Put's read-back of the key when,
		// unsure whether its write landed, it reads the key back; not
		// when the server was never reached.
		readBack int
	}{
		// The SDK does not retry NXDOMAIN: a name that does not resolve
		// now will not a moment later. It is still no answer from S3.
		{"dns no such host", &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}, 1, 0},
		{"dns server failure", &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}, attempts, 0},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, attempts, 0},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("read: connection reset by peer")}, attempts, attempts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int64
			cfg := testConfig("http://127.0.0.1:1")
			cfg.HTTPClient = clientFunc(func(*http.Request) (*http.Response, error) {
				n.Add(1)
				return nil, c.err
			})
			s, err := s3express.New(cfg, s3express.Options{Buckets: threeBuckets(), LocalAZ: azA, S3Compatible: true})
			require.NoError(t, err)
			_, err = s.Put(t.Context(), "k", []byte("x"))
			requireKind(t, err, storage.ErrUnavailable, "Put")
			_, err = s.GetRange(t.Context(), metadata.ObjectRef{Bucket: bucketB, Key: "k"}, 0, 1)
			requireKind(t, err, storage.ErrUnavailable, "GetRange")
			_, err = s.List(t.Context(), bucketC, "")
			requireKind(t, err, storage.ErrUnavailable, "List")
			err = s.Delete(t.Context(), []metadata.ObjectRef{{Bucket: bucketC, Key: "k"}})
			requireKind(t, err, storage.ErrUnavailable, "Delete")
			assert.Equal(t, int64(4*c.attempts+c.readBack), n.Load(), "HTTP attempts of the four operations")
		})
	}
}

func TestRequestTimeoutIsRetriedThenUnavailable(t *testing.T) {
	release := make(chan struct{})
	f := newFakeS3(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}
	t.Cleanup(func() { close(release) }) // runs before the server closes
	s := newFakeStore(t, f, func(o *s3express.Options) { o.RequestTimeout = 50 * time.Millisecond })
	_, err := s.GetRange(t.Context(), metadata.ObjectRef{Bucket: bucketA, Key: "slow"}, 0, 1)
	requireKind(t, err, storage.ErrUnavailable, "GetRange")
	assert.NotErrorIs(t, err, context.Canceled)
	assert.Len(t, f.requests(), attempts, "each timed-out attempt is retried")
}

func TestCallerCancellationStaysCanceled(t *testing.T) {
	arrived := make(chan struct{}, attempts)
	f := newFakeS3(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		arrived <- struct{}{}
		<-r.Context().Done()
		return true
	}
	s := newFakeStore(t, f, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := s.Put(ctx, "k", []byte("x"))
	require.ErrorIs(t, err, context.Canceled)
	requireKind(t, err, nil, "a cancelled Put is no store failure")
	assert.Len(t, f.requests(), 1, "a cancelled request is not retried")

	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = s.GetRange(ctx, metadata.ObjectRef{Bucket: bucketA, Key: "k"}, 0, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireKind(t, err, nil, "the caller's deadline is no store failure")
}

func TestBadInputMakesNoRequest(t *testing.T) {
	f := newFakeS3(t, ok200)
	s := newFakeStore(t, f, func(o *s3express.Options) { o.KeyPrefix = strings.Repeat("p", 1000) })
	ctx := t.Context()
	known := metadata.ObjectRef{AZ: azB, Bucket: bucketB, Key: "k"}
	unknown := metadata.ObjectRef{AZ: azB, Bucket: "someone-elses-bucket", Key: "k"}
	wrongAZ := metadata.ObjectRef{AZ: azC, Bucket: bucketB, Key: "k"}
	canceled, cancel := context.WithCancel(ctx)
	cancel()

	check := func(name string, err error, want error) {
		t.Helper()
		requireKind(t, err, want, name)
		var se *s3express.Error
		require.ErrorAs(t, err, &se, name)
		assert.NotEmpty(t, se.Op, name)
	}
	get := func(ctx context.Context, ref metadata.ObjectRef, off, n int64) error {
		_, err := s.GetRange(ctx, ref, off, n)
		return err
	}
	put := func(ctx context.Context, key string) error {
		_, err := s.Put(ctx, key, []byte("x"))
		return err
	}
	list := func(ctx context.Context, bucket string) error {
		_, err := s.List(ctx, bucket, "")
		return err
	}
	check("GetRange of an unconfigured bucket", get(ctx, unknown, 0, 1), storage.ErrUnknownBucket)
	check("GetRange naming another AZ for a bucket", get(ctx, wrongAZ, 0, 1), storage.ErrUnknownBucket)
	check("GetRange with zero length", get(ctx, known, 0, 0), storage.ErrInvalidRange)
	check("GetRange with negative offset", get(ctx, known, -1, 1), storage.ErrInvalidRange)
	check("GetRange overflowing int64", get(ctx, known, 1<<62, 1<<62+1), storage.ErrInvalidRange)
	check("Delete with one unconfigured bucket", s.Delete(ctx, []metadata.ObjectRef{known, unknown}), storage.ErrUnknownBucket)
	check("Delete of an empty key", s.Delete(ctx, []metadata.ObjectRef{{Bucket: bucketB}}), s3express.ErrInvalidKey)
	check("Delete of a control-character key", s.Delete(ctx, []metadata.ObjectRef{{Bucket: bucketB, Key: "a\x01b"}}), s3express.ErrInvalidKey)
	check("Delete of an unknown bucket and a bad key", s.Delete(ctx, []metadata.ObjectRef{{Bucket: bucketB, Key: "a\nb"}, unknown}), storage.ErrUnknownBucket)
	check("Put of a key with a newline", put(ctx, "a\nb"), s3express.ErrInvalidKey)
	check("Put of a key with DEL", put(ctx, "a\x7f"), s3express.ErrInvalidKey)
	check("List of an unconfigured bucket", list(ctx, unknown.Bucket), storage.ErrUnknownBucket)
	check("Put of an empty key", put(ctx, ""), s3express.ErrInvalidKey)
	check("Put of a non-UTF-8 key", put(ctx, "k\xff"), s3express.ErrInvalidKey)
	check("Put of a key too long with the prefix", put(ctx, strings.Repeat("k", 25)), s3express.ErrInvalidKey)
	check("Put with a cancelled context", put(canceled, "k"), nil)
	check("GetRange with a cancelled context", get(canceled, known, 0, 1), nil)
	check("Delete with a cancelled context", s.Delete(canceled, []metadata.ObjectRef{known}), nil)
	check("List with a cancelled context", list(canceled, bucketB), nil)
	require.NoError(t, s.Delete(ctx, nil), "Delete of nothing")
	assert.Empty(t, f.requests(), "no request may be made for bad input")

	err := get(ctx, unknown, 0, 1)
	assert.Contains(t, err.Error(), "someone-elses-bucket/k")
	assert.Contains(t, err.Error(), bucketA, "the error lists the configured buckets")
}

func TestNewValidatesOptions(t *testing.T) {
	valid := func() s3express.Options {
		return s3express.Options{Buckets: threeBuckets(), LocalAZ: azA}
	}
	cases := []struct {
		name string
		mod  func(*s3express.Options)
		want string // substring of the error; "" means valid
	}{
		{"directory buckets", nil, ""},
		{"standard buckets", func(o *s3express.Options) {
			o.Buckets = map[string]string{"us-east-1a": "logs.example-1", "us-east-1b": "logs-example-2"}
			o.LocalAZ = "us-east-1b"
		}, ""},
		{"mixed, local zone id", func(o *s3express.Options) {
			o.Buckets = map[string]string{"usw2-lax1-az1": "wal--usw2-lax1-az1--x-s3", "usw2-az2": "wal-standard"}
			o.LocalAZ = "usw2-lax1-az1"
		}, ""},
		{"no buckets", func(o *s3express.Options) { o.Buckets = nil }, "Options.Buckets is empty"},
		{"local AZ missing", func(o *s3express.Options) { o.LocalAZ = "use1-az1" }, `Options.LocalAZ "use1-az1"`},
		{"empty AZ id", func(o *s3express.Options) { o.Buckets[""] = "x-bucket" }, "Options.Buckets: AZ id"},
		{"directory bucket in another AZ", func(o *s3express.Options) { o.Buckets[azB] = bucketA }, `Options.Buckets["use1-az5"]: directory bucket "walrus--use1-az4--x-s3" is in AZ "use1-az4"`},
		{"bucket shared by two AZs", func(o *s3express.Options) {
			o.Buckets = map[string]string{"a": "shared-bucket", "b": "shared-bucket"}
			o.LocalAZ = "a"
		}, "mapped from both"},
		{"directory name without AZ", func(o *s3express.Options) { o.Buckets[azB] = "walrus--x-s3" }, `Options.Buckets["use1-az5"]: directory bucket name "walrus--x-s3"`},
		{"directory name with bad AZ id", func(o *s3express.Options) { o.Buckets[azB] = "walrus--use1-zone5--x-s3" }, "does not end in azN"},
		{"directory name with uppercase", func(o *s3express.Options) { o.Buckets[azB] = "Walrus--use1-az5--x-s3" }, "base name"},
		{"directory name missing a dash", func(o *s3express.Options) { o.Buckets[azB] = "walrus--use1-az5-x-s3" }, "looks like a directory bucket name"},
		{"directory name too long", func(o *s3express.Options) { o.Buckets[azB] = strings.Repeat("w", 50) + "--use1-az5--x-s3" }, "3 to 63"},
		{"standard name with underscore", func(o *s3express.Options) { o.Buckets[azB] = "my_bucket" }, `has '_'`},
		{"standard name as IP", func(o *s3express.Options) { o.Buckets[azB] = "192.168.1.1" }, "IP address"},
		{"standard name reserved prefix", func(o *s3express.Options) { o.Buckets[azB] = "xn--bucket" }, "reserved"},
		{"negative concurrency", func(o *s3express.Options) { o.Concurrency = -1 }, "Options.Concurrency"},
		{"negative timeout", func(o *s3express.Options) { o.RequestTimeout = -time.Second }, "Options.RequestTimeout"},
		{"KMS key without KMS", func(o *s3express.Options) { o.KMSKeyID = "k" }, "Options.KMSKeyID"},
		{"unknown SSE", func(o *s3express.Options) { o.SSE = 7 }, "Options.SSE"},
		{"unsupported checksum", func(o *s3express.Options) { o.Checksum = "MD5" }, "Options.Checksum"},
		{"key prefix too long", func(o *s3express.Options) { o.KeyPrefix = strings.Repeat("p", 1024) }, "Options.KeyPrefix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := valid()
			if c.mod != nil {
				c.mod(&opts)
			}
			var n atomic.Int64
			opts.ClientOptions = []func(*s3.Options){countRequests(&n)}
			s, err := s3express.New(aws.Config{Region: "us-east-1"}, opts)
			if c.want == "" {
				require.NoError(t, err)
				assert.Equal(t, opts.LocalAZ, s.Local().AZ)
				assert.Equal(t, opts.Buckets[opts.LocalAZ], s.Local().Bucket)
				assert.Empty(t, s.Local().Key)
				s.CloseIdleConnections()
				return
			}
			require.ErrorContains(t, err, c.want)
			assert.Nil(t, s)
			assert.Zero(t, n.Load())
		})
	}
}

// TestDeleteSkipsBadKeysAndGoesOn checks that a key S3 would refuse is
// reported without being sent, so that it cannot fail the DeleteObjects
// batch it would have been in, and that the other keys are still deleted;
// and that a refused batch does not stop the bucket's later batches,
// while an unavailable one does.
func TestDeleteSkipsBadKeysAndGoesOn(t *testing.T) {
	var batch atomic.Int64
	f := newFakeS3(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		if batch.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(400)
			fmt.Fprint(w, `<Error><Code>MalformedXML</Code><Message>refused</Message><RequestId>req-400</RequestId></Error>`)
			return true
		}
		fmt.Fprint(w, `<DeleteResult></DeleteResult>`)
		return true
	}
	s := newFakeStore(t, f, nil)
	var refs []metadata.ObjectRef
	for i := range 2500 {
		refs = append(refs, metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: fmt.Sprintf("k%04d", i)})
	}
	refs = append(refs,
		metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: "bell\x07"},
		metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: " \u00a0 "},
		metadata.ObjectRef{AZ: azA, Bucket: bucketA, Key: "next\u0085line"})
	err := s.Delete(t.Context(), refs)
	require.Error(t, err)
	assert.ErrorIs(t, err, s3express.ErrInvalidKey)
	assert.ErrorIs(t, err, storage.ErrPermanent, "the refused batch is reported")
	assert.NotErrorIs(t, err, storage.ErrUnavailable)
	for _, k := range []string{"U+0007", "whitespace", "U+0085"} {
		assert.Contains(t, err.Error(), k)
	}
	reqs := f.requests()
	require.Len(t, reqs, 3, "all three batches are sent, the refused first one not stopping the others")
	for _, r := range reqs {
		assert.NotContains(t, string(r.body), "bell", "a bad key is never sent")
		assert.NotContains(t, string(r.body), "<Key> \u00a0 </Key>")
	}

	// A standard bucket takes a whitespace key; a key prefix makes the
	// name no longer all whitespace.
	std, err := s3express.New(testConfig(f.URL), s3express.Options{
		Buckets: map[string]string{"a": "std-bucket-a"}, LocalAZ: "a", S3Compatible: true})
	require.NoError(t, err)
	t.Cleanup(std.CloseIdleConnections)
	f.handler = func(w http.ResponseWriter, r *http.Request) bool { return false }
	f.script = []canned{ok200}
	_, err = std.Put(t.Context(), "  ", []byte("x"))
	require.NoError(t, err)
	prefixed := newFakeStore(t, f, func(o *s3express.Options) { o.KeyPrefix = "p/" })
	_, err = prefixed.Put(t.Context(), "  ", []byte("x"))
	require.NoError(t, err)
	_, err = s.Put(t.Context(), "  ", []byte("x"))
	requireKind(t, err, s3express.ErrInvalidKey, "a whitespace key in a directory bucket")
}

// TestDefaultTimeoutRetriesAStalledAttempt: with no RequestTimeout, an
// attempt that stops answering ends after its size-based timeout (two
// seconds for a small range), and the SDK's retry gets the answer.
func TestDefaultTimeoutRetriesAStalledAttempt(t *testing.T) {
	release := make(chan struct{})
	f := newFakeS3(t, canned{status: 206, header: map[string]string{"Content-Range": "bytes 0-4/10"}, body: "01234"})
	var first atomic.Bool
	f.handler = func(w http.ResponseWriter, r *http.Request) bool {
		if first.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return true
		}
		return false
	}
	t.Cleanup(func() { close(release) })
	s := newFakeStore(t, f, nil)
	b, err := s.GetRange(t.Context(), metadata.ObjectRef{Bucket: bucketA, Key: "stalls-once"}, 0, 5)
	require.NoError(t, err)
	assert.Equal(t, "01234", string(b))
	assert.Len(t, f.requests(), 2)
}
