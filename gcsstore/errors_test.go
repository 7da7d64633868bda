package gcsstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"

	"github.com/activetier/activetier/gcsstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// attempts is the store's default number of attempts.
const attempts = gcsstore.DefaultMaxAttempts

func TestPutErrorMapping(t *testing.T) {
	const payload = "payload"
	ok := uploaded("obj/1", len(payload))
	hangUp := canned{hangUp: true}
	cases := []struct {
		name     string
		script   []canned // the upload attempts, then the read-back reads if any
		want     error    // nil: Put succeeds
		status   int
		requests int
	}{
		{"stored", []canned{ok}, nil, 0, 1},
		{"key taken", []canned{gcsError(412, "conditionNotMet")}, storage.ErrAlreadyExists, 412, 1},
		{"unavailable then stored", []canned{gcsError(503, "backendError"), ok}, nil, 0, 2},
		{"throttled then stored", []canned{gcsError(429, "rateLimitExceeded"), ok}, nil, 0, 2},
		// Every attempt failed in a way that may have stored the object,
		// and so does every attempt of the read-back.
		{"unavailable until attempts run out", []canned{gcsError(503, "backendError")}, storage.ErrUnavailable, 503, 2 * attempts},
		{"internal error", []canned{gcsError(500, "internalError")}, storage.ErrUnavailable, 500, 2 * attempts},
		{"connection closed", []canned{hangUp}, storage.ErrUnavailable, 0, 2 * attempts},
		// Refusals: one request, no retry, no read-back.
		{"not implemented", []canned{gcsError(501, "notImplemented")}, storage.ErrPermanent, 501, 1},
		{"forbidden", []canned{gcsError(403, "forbidden")}, storage.ErrPermanent, 403, 1},
		{"unauthenticated", []canned{gcsError(401, "required")}, storage.ErrPermanent, 401, 1},
		{"no such bucket", []canned{gcsError(404, "notFound")}, storage.ErrPermanent, 404, 1},
		{"bad request", []canned{gcsError(400, "invalid")}, storage.ErrPermanent, 400, 1},
		// A lost answer: the first attempt stored the object, its retry
		// finds the key taken. The read-back recognises the body.
		{"retry finds its own object", []canned{gcsError(500, "internalError"), gcsError(412, "conditionNotMet"), object(payload)}, nil, 0, 3},
		{"retry finds another object", []canned{gcsError(500, "internalError"), gcsError(412, "conditionNotMet"), object("payloaX")}, storage.ErrAlreadyExists, 412, 3},
		{"retry finds a longer object", []canned{gcsError(503, "backendError"), gcsError(412, "conditionNotMet"), object("a longer body")}, storage.ErrAlreadyExists, 412, 3},
		{"no answer, own object stored", []canned{hangUp, hangUp, hangUp, object(payload)}, nil, 0, attempts + 1},
		{"no answer, nothing stored", []canned{hangUp, hangUp, hangUp, gcsError(404, "notFound")}, storage.ErrUnavailable, 0, attempts + 1},
		{"read-back of a prefix of the body", []canned{hangUp, hangUp, hangUp, object("payl")}, storage.ErrUnavailable, 0, 2 * attempts},
		{"no answer, read-back retried", []canned{hangUp, hangUp, hangUp, gcsError(503, "backendError"), object(payload)}, nil, 0, attempts + 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeGCS(t, c.script...)
			s := newFakeStore(t, f, nil)
			ref, err := s.Put(t.Context(), "obj/1", []byte(payload))
			reqs := f.requests()
			assert.Len(t, reqs, c.requests, "HTTP requests")
			for i, r := range reqs {
				if isUpload(r) {
					assert.Contains(t, r.rawQuery, "ifGenerationMatch=0", "request %d: every upload is conditional", i)
				} else {
					assert.True(t, isRead(r), "request %d: only the read-back follows the uploads, got %s %s", i, r.method, r.path)
				}
			}
			if c.want == nil {
				require.NoError(t, err)
				assert.Equal(t, metadata.ObjectRef{AZ: zoneA, Bucket: bucketA, Key: "obj/1"}, ref)
				return
			}
			requireKind(t, err, c.want, "Put")
			var ge *gcsstore.Error
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, "Put", ge.Op)
			assert.Equal(t, bucketA, ge.Bucket)
			assert.Equal(t, "obj/1", ge.Key)
			assert.Equal(t, c.status, ge.Status)
			assert.Contains(t, err.Error(), bucketA+"/obj/1", "the error names bucket and key")
			if c.status != 0 {
				var apiErr *googleapi.Error
				require.ErrorAs(t, err, &apiErr, "the library's error stays reachable")
			}
		})
	}
}

func TestGetRangeErrorMapping(t *testing.T) {
	cases := []struct {
		name     string
		script   []canned
		want     error // nil: GetRange returns "56789abcde"
		requests int
	}{
		{"range", []canned{partial("bytes 5-14/100", "56789abcde", 0)}, nil, 1},
		{"no such object", []canned{{status: 404, body: "Not Found"}}, storage.ErrNotFound, 1},
		{"range not satisfiable", []canned{{status: 416, body: "<Error><Code>InvalidRange</Code></Error>"}}, storage.ErrInvalidRange, 1},
		{"range cut at the object's end", []canned{partial("bytes 5-9/10", "56789", 0)}, storage.ErrInvalidRange, 1},
		{"forbidden", []canned{{status: 403, body: "<Error><Code>AccessDenied</Code></Error>"}}, storage.ErrPermanent, 1},
		{"not implemented", []canned{{status: 501, body: "<Error><Code>NotImplemented</Code></Error>"}}, storage.ErrPermanent, 1},
		{"unavailable", []canned{{status: 503}}, storage.ErrUnavailable, attempts},
		{"unavailable once", []canned{{status: 503}, partial("bytes 5-14/100", "56789abcde", 0)}, nil, 2},
		{"connection closed", []canned{{hangUp: true}}, storage.ErrUnavailable, attempts},
		// Answers that disagree with the request are attempt failures,
		// retried like a 503.
		// The library resumes a body cut short from where it stopped
		// (bytes=10-14); here the resumed answer holds other bytes, which
		// the store refuses, so each attempt makes two requests.
		{"body cut short", []canned{partial("bytes 5-14/100", "56789", 5)}, storage.ErrUnavailable, 2 * attempts},
		{"body cut short once, resumed wrong", []canned{partial("bytes 5-14/100", "56789", 5), partial("bytes 5-14/100", "56789abcde", 0)}, nil, 3},
		{"body cut short once, resumed right", []canned{partial("bytes 5-14/100", "56789", 5), partial("bytes 10-14/100", "abcde", 0)}, nil, 2},
		{"range running past the asked end", []canned{partial("bytes 5-20/100", "56789abcdefghijk", 0)}, storage.ErrUnavailable, attempts},
		{"range ignored", []canned{object(strings.Repeat("x", 100))}, storage.ErrUnavailable, attempts},
		{"other range returned", []canned{partial("bytes 0-9/100", "0123456789", 0)}, storage.ErrUnavailable, attempts},
		{"malformed Content-Range", []canned{partial("bytes five-nine/ten", "0123456789", 0)}, storage.ErrUnavailable, attempts},
	}
	for _, c := range cases {
		for _, read := range []struct {
			name string
			fn   func(ctx context.Context, s *gcsstore.Store, ref metadata.ObjectRef) ([]byte, error)
		}{
			{"GetRange", func(ctx context.Context, s *gcsstore.Store, ref metadata.ObjectRef) ([]byte, error) {
				return s.GetRange(ctx, ref, 5, 10)
			}},
			{"ReadRange", func(ctx context.Context, s *gcsstore.Store, ref metadata.ObjectRef) ([]byte, error) {
				return storagetest.CheckedReadRange(ctx, s, ref, 5, 10)
			}},
		} {
			t.Run(read.name+"/"+c.name, func(t *testing.T) {
				testGetRangeErrorMapping(t, c.script, c.want, c.requests, read.name, read.fn)
			})
		}
	}
}

// testGetRangeErrorMapping reads bytes 5-14 of an object with read from a
// fake server answering script, and checks that it takes requests and
// fails with want, or returns "56789abcde" if want is nil.
func testGetRangeErrorMapping(t *testing.T, script []canned, want error, requests int, op string, read func(context.Context, *gcsstore.Store, metadata.ObjectRef) ([]byte, error)) {
	f := newFakeGCS(t, script...)
	s := newFakeStore(t, f, nil)
	ref := metadata.ObjectRef{AZ: zoneB, Bucket: bucketB, Key: "obj/2"}
	got, err := read(t.Context(), s, ref)
	reqs := f.requests()
	assert.Len(t, reqs, requests, "HTTP attempts")
	for _, r := range reqs {
		assert.Contains(t, []string{"bytes=5-14", "bytes=10-14"}, r.header.Get("Range"), "the range, or its resumption")
		assert.Equal(t, "/"+bucketB+"/obj/2", r.path)
	}
	if want == nil {
		require.NoError(t, err)
		assert.Equal(t, "56789abcde", string(got))
		return
	}
	requireKind(t, err, want, op)
	assert.Nil(t, got)
	var ge *gcsstore.Error
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, min(requests, attempts), ge.Attempts)
	assert.Contains(t, err.Error(), bucketB+"/obj/2")
}

func TestDeleteIgnoresMissingAndNamesFailures(t *testing.T) {
	f := newFakeGCS(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/gone"):
			w.WriteHeader(404)
		case strings.HasSuffix(r.URL.Path, "/denied"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(403)
			fmt.Fprint(w, `{"error":{"code":403,"message":"denied","errors":[{"reason":"forbidden"}]}}`)
		default:
			w.WriteHeader(204)
		}
	}
	s := newFakeStore(t, f, func(o *gcsstore.Options) { o.KeyPrefix = "p/" })
	var refs []metadata.ObjectRef
	for i := range 40 {
		refs = append(refs, metadata.ObjectRef{AZ: zoneA, Bucket: bucketA, Key: fmt.Sprintf("k%02d", i)})
	}
	refs = append(refs, refs[0], // named twice, deleted once
		metadata.ObjectRef{AZ: zoneA, Bucket: bucketA, Key: "bell\x07"}, // refused, not sent
		metadata.ObjectRef{AZ: zoneA, Bucket: bucketA, Key: "gone"},
		metadata.ObjectRef{AZ: zoneC, Bucket: bucketC, Key: "denied"})
	err := s.Delete(t.Context(), refs)
	require.ErrorIs(t, err, storage.ErrPermanent, "Delete")
	require.ErrorIs(t, err, gcsstore.ErrInvalidKey, "Delete")
	assert.NotErrorIs(t, err, storage.ErrUnavailable)
	assert.Contains(t, err.Error(), "U+0007")
	assert.Contains(t, err.Error(), bucketC+"/denied")
	assert.NotContains(t, err.Error(), "gone")

	reqs := f.requests()
	assert.Len(t, reqs, 42, "one DELETE per distinct object, none retried")
	for _, r := range reqs {
		assert.Equal(t, http.MethodDelete, r.method)
		assert.Contains(t, r.path, "/o/p/", "keys carry the prefix on the wire")
	}
}

func TestDeleteFailureStopsOnlyItsBucket(t *testing.T) {
	var toA, toC atomic.Int64
	f := newFakeGCS(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/b/"+bucketA+"/") {
			toA.Add(1)
			w.WriteHeader(503)
			return
		}
		toC.Add(1)
		w.WriteHeader(204)
	}
	s := newFakeStore(t, f, func(o *gcsstore.Options) { o.DeleteConcurrency = 1 })
	var refs []metadata.ObjectRef
	for i := range 50 {
		refs = append(refs, metadata.ObjectRef{Bucket: bucketA, Key: fmt.Sprintf("a%d", i)})
	}
	for i := range 5 {
		refs = append(refs, metadata.ObjectRef{Bucket: bucketC, Key: fmt.Sprintf("c%d", i)})
	}
	err := s.Delete(t.Context(), refs)
	requireKind(t, err, storage.ErrUnavailable, "Delete")
	assert.Contains(t, err.Error(), "49 keys not attempted")
	assert.Equal(t, int64(attempts), toA.Load(), "bucket A's first delete is retried, the rest never sent")
	assert.Equal(t, int64(5), toC.Load(), "bucket C is still cleaned up")
}

func TestListFollowsPagesAndRefusesALoop(t *testing.T) {
	page := func(token string, names ...string) canned {
		var items []string
		for _, n := range names {
			items = append(items, fmt.Sprintf(`{"name":%q,"size":"%d","updated":"2025-01-02T03:04:05.000Z"}`, n, len(n)))
		}
		body := `{"kind":"storage#objects","items":[` + strings.Join(items, ",") + `]`
		if token != "" {
			body += fmt.Sprintf(`,"nextPageToken":%q`, token)
		}
		return canned{status: 200, header: map[string]string{"Content-Type": "application/json"}, body: body + "}"}
	}
	f := newFakeGCS(t, page("t1", "p/list/b", "p/list/a"), gcsError(503, "backendError"), page("", "p/list/c", "p/other"))
	s := newFakeStore(t, f, func(o *gcsstore.Options) { o.KeyPrefix = "p/" })
	infos, err := s.List(t.Context(), bucketB, "list/")
	require.NoError(t, err)
	var keys []string
	for _, info := range infos {
		keys = append(keys, info.Ref.Key)
		assert.Equal(t, zoneB, info.Ref.AZ)
		assert.Equal(t, int64(len("p/"+info.Ref.Key)), info.Size)
		assert.Equal(t, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), info.LastModified)
	}
	assert.ElementsMatch(t, []string{"list/a", "list/b", "list/c"}, keys, "a name outside the prefix is dropped")
	reqs := f.requests()
	require.Len(t, reqs, 3)
	assert.Contains(t, reqs[0].rawQuery, "prefix=p%2Flist%2F")
	assert.Contains(t, reqs[2].rawQuery, "pageToken=t1", "the page is asked for again after a 503")

	f = newFakeGCS(t, page("t1", "p/a"), page("t1", "p/b"))
	s = newFakeStore(t, f, func(o *gcsstore.Options) { o.KeyPrefix = "p/" })
	_, err = s.List(t.Context(), bucketB, "")
	requireKind(t, err, storage.ErrUnavailable, "a server repeating its page token")
	assert.Len(t, f.requests(), 2)

	f = newFakeGCS(t, gcsError(404, "notFound"))
	s = newFakeStore(t, f, nil)
	_, err = s.List(t.Context(), bucketB, "")
	requireKind(t, err, storage.ErrPermanent, "listing a bucket that does not exist")
}

func TestRequestTimeoutIsRetriedThenUnavailable(t *testing.T) {
	release := make(chan struct{})
	f := newFakeGCS(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	t.Cleanup(func() { close(release) }) // runs before the server closes
	s := newFakeStore(t, f, func(o *gcsstore.Options) { o.RequestTimeout = 50 * time.Millisecond })
	_, err := s.GetRange(t.Context(), metadata.ObjectRef{Bucket: bucketA, Key: "slow"}, 0, 1)
	requireKind(t, err, storage.ErrUnavailable, "GetRange")
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the store's attempt timeout is not the caller's deadline")
	assert.NotErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "Options.RequestTimeout")
	assert.Len(t, f.requests(), attempts, "each timed-out attempt is retried")
}

func TestCallerCancellationStaysCanceled(t *testing.T) {
	arrived := make(chan struct{}, 10)
	f := newFakeGCS(t)
	f.handler = func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
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
	assert.Len(t, f.requests(), 1, "a cancelled request is neither retried nor read back")

	ctx, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	_, err = s.GetRange(ctx, metadata.ObjectRef{Bucket: bucketA, Key: "k"}, 0, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireKind(t, err, nil, "the caller's deadline is no store failure")
}

func TestBadInputMakesNoRequest(t *testing.T) {
	f := newFakeGCS(t, canned{status: 200})
	s := newFakeStore(t, f, func(o *gcsstore.Options) { o.KeyPrefix = strings.Repeat("p", 1000) })
	ctx := t.Context()
	known := metadata.ObjectRef{AZ: zoneB, Bucket: bucketB, Key: "k"}
	unknown := metadata.ObjectRef{AZ: zoneB, Bucket: "someone-elses-bucket", Key: "k"}
	wrongZone := metadata.ObjectRef{AZ: zoneC, Bucket: bucketB, Key: "k"}
	canceled, cancel := context.WithCancel(ctx)
	cancel()

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
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"GetRange of an unconfigured bucket", get(ctx, unknown, 0, 1), storage.ErrUnknownBucket},
		{"GetRange naming another zone for a bucket", get(ctx, wrongZone, 0, 1), storage.ErrUnknownBucket},
		{"GetRange with zero length", get(ctx, known, 0, 0), storage.ErrInvalidRange},
		{"GetRange with negative offset", get(ctx, known, -1, 1), storage.ErrInvalidRange},
		{"GetRange overflowing int64", get(ctx, known, 1<<62, 1<<62+1), storage.ErrInvalidRange},
		{"GetRange of a control-character key", get(ctx, metadata.ObjectRef{Bucket: bucketB, Key: "a\nb"}, 0, 1), gcsstore.ErrInvalidKey},
		{"Delete with one unconfigured bucket", s.Delete(ctx, []metadata.ObjectRef{known, unknown}), storage.ErrUnknownBucket},
		{"Delete of an empty key", s.Delete(ctx, []metadata.ObjectRef{{Bucket: bucketB}}), gcsstore.ErrInvalidKey},
		{"Delete of a bad key and an unconfigured bucket", s.Delete(ctx, []metadata.ObjectRef{{Bucket: bucketB, Key: "a\x01"}, unknown}), storage.ErrUnknownBucket},
		{"List of an unconfigured bucket", list(ctx, unknown.Bucket), storage.ErrUnknownBucket},
		{"Put of an empty key", put(ctx, ""), gcsstore.ErrInvalidKey},
		{"Put of a non-UTF-8 key", put(ctx, "k\xff"), gcsstore.ErrInvalidKey},
		{"Put of a key with a carriage return", put(ctx, "k\r"), gcsstore.ErrInvalidKey},
		{"Put of a key with a C1 control", put(ctx, "k\u0085"), gcsstore.ErrInvalidKey},
		{"Put of a key too long with the prefix", put(ctx, strings.Repeat("k", 25)), gcsstore.ErrInvalidKey},
		{"Put with a cancelled context", put(canceled, "k"), nil},
		{"GetRange with a cancelled context", get(canceled, known, 0, 1), nil},
		{"Delete with a cancelled context", s.Delete(canceled, []metadata.ObjectRef{known}), nil},
		{"List with a cancelled context", list(canceled, bucketB), nil},
	}
	for _, c := range cases {
		requireKind(t, c.err, c.want, c.name)
		var ge *gcsstore.Error
		require.ErrorAs(t, c.err, &ge, c.name)
		assert.NotEmpty(t, ge.Op, c.name)
		if c.want == nil {
			assert.ErrorIs(t, c.err, context.Canceled, c.name)
		}
	}
	require.NoError(t, s.Delete(ctx, nil), "Delete of nothing")
	assert.Empty(t, f.requests(), "no request may be made for bad input")

	err := get(ctx, unknown, 0, 1)
	assert.Contains(t, err.Error(), "someone-elses-bucket/k")
	assert.Contains(t, err.Error(), bucketA, "the error lists the configured buckets")
}

func TestNewValidatesOptions(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*gcsstore.Options)
		want string // substring of the error; "" means valid
	}{
		{"three zones", nil, ""},
		{"dotted bucket name", func(o *gcsstore.Options) { o.Buckets[zoneB] = "wal.example.com" }, ""},
		{"no buckets", func(o *gcsstore.Options) { o.Buckets = nil }, "Options.Buckets is empty"},
		{"local zone missing", func(o *gcsstore.Options) { o.LocalAZ = "us-east1-b" }, `Options.LocalAZ "us-east1-b"`},
		{"empty zone", func(o *gcsstore.Options) { o.Buckets[""] = "some-bucket" }, "empty zone name"},
		{"zone with uppercase", func(o *gcsstore.Options) { o.Buckets["US-central1-f"] = "some-bucket" }, "lowercase"},
		{"bucket shared by two zones", func(o *gcsstore.Options) { o.Buckets[zoneB] = bucketA }, "mapped from both"},
		{"bucket name too short", func(o *gcsstore.Options) { o.Buckets[zoneB] = "ab" }, "3 to 63"},
		{"bucket name too long", func(o *gcsstore.Options) { o.Buckets[zoneB] = strings.Repeat("w", 64) }, "each dot-separated part"},
		{"bucket name with uppercase", func(o *gcsstore.Options) { o.Buckets[zoneB] = "Walrus" }, "start and end"},
		{"bucket name with a space", func(o *gcsstore.Options) { o.Buckets[zoneB] = "wal rus" }, `has ' '`},
		{"bucket name as IP", func(o *gcsstore.Options) { o.Buckets[zoneB] = "192.168.1.1" }, "IP address"},
		{"bucket name with google", func(o *gcsstore.Options) { o.Buckets[zoneB] = "my-google-wal" }, "reserved"},
		{"bucket name starting goog", func(o *gcsstore.Options) { o.Buckets[zoneB] = "goog-wal" }, "reserved"},
		{"negative timeout", func(o *gcsstore.Options) { o.RequestTimeout = -time.Second }, "Options.RequestTimeout"},
		{"negative attempts", func(o *gcsstore.Options) { o.MaxAttempts = -1 }, "Options.MaxAttempts"},
		{"negative backoff", func(o *gcsstore.Options) { o.MaxBackoff = -1 }, "Options.MaxBackoff"},
		{"negative delete concurrency", func(o *gcsstore.Options) { o.DeleteConcurrency = -1 }, "Options.DeleteConcurrency"},
		{"key prefix too long", func(o *gcsstore.Options) { o.KeyPrefix = strings.Repeat("p", 1024) }, "Options.KeyPrefix"},
		{"key prefix with a newline", func(o *gcsstore.Options) { o.KeyPrefix = "a\n" }, "Options.KeyPrefix"},
		{"endpoint without scheme", func(o *gcsstore.Options) { o.Endpoint = "127.0.0.1:4443" }, "Options.Endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// An emulator endpoint, so that no credentials are looked
			// for; nothing listens there and nothing is sent.
			opts := gcsstore.Options{Buckets: threeBuckets(), LocalAZ: zoneA, Endpoint: "http://127.0.0.1:1"}
			if c.mod != nil {
				c.mod(&opts)
			}
			s, err := gcsstore.New(t.Context(), opts)
			if c.want == "" {
				require.NoError(t, err)
				assert.Equal(t, metadata.ObjectRef{AZ: zoneA, Bucket: opts.Buckets[zoneA]}, s.Local())
				require.NoError(t, s.Close())
				return
			}
			require.ErrorContains(t, err, c.want)
			assert.Nil(t, s)
		})
	}
}
