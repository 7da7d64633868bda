package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// fakeStore is an ObjectStore whose calls run put and get.
type fakeStore struct {
	put func(ctx context.Context) error
	get func(ctx context.Context) error
}

func (f *fakeStore) Local() metadata.ObjectRef { return metadata.ObjectRef{AZ: "az1", Bucket: "b1"} }

func (f *fakeStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	if err := f.put(ctx); err != nil {
		return metadata.ObjectRef{}, err
	}
	ref := f.Local()
	ref.Key = key
	return ref, nil
}

func (f *fakeStore) GetRange(ctx context.Context, _ metadata.ObjectRef, _, length int64) ([]byte, error) {
	if err := f.get(ctx); err != nil {
		return nil, err
	}
	return make([]byte, length), nil
}

func (f *fakeStore) Delete(context.Context, []metadata.ObjectRef) error { return nil }

func (f *fakeStore) List(context.Context, string, string) ([]storage.ObjectInfo, error) {
	return nil, nil
}

// acctCountingStore is a countingStore over f, as a --store backend makes
// one, and the calls it counts into.
func acctCountingStore(f *fakeStore) (storage.ObjectStore, *storeCalls) {
	calls := newStoreCalls([]string{"az1"}, map[string]string{"az1": "b1"}, false)
	return newCountingStore(f, calls), calls
}

// requireBalanced requires every PUT of c to have ended exactly one way,
// and no counter to be negative.
func requireBalanced(t *testing.T, c requestCounts) {
	t.Helper()
	require.Equal(t, c.puts, c.putsStored+c.putsFailed+c.putsGivenUp, "every PUT ended one way: %+v", c)
	require.LessOrEqual(t, c.putsFailed, c.failed, "%+v", c)
	require.LessOrEqual(t, c.putsGivenUp, c.givenUp, "%+v", c)
	for _, v := range []int64{c.puts, c.gets, c.deletes, c.lists, c.failed, c.givenUp, c.putsStored, c.putsFailed, c.putsGivenUp, c.bytesUp, c.bytesDown} {
		require.GreaterOrEqual(t, v, int64(0), "%+v", c)
	}
}

// A Put the wrapper counts ends one way, by the caller's context as the
// call returns: refused before it began, cut short, failed by the store,
// or answered with success after the caller stopped waiting, which the
// caller never learnt of (an attempt past the engine's timeout that the
// store finished anyway, whose retry stores the object again).
func TestAcctCountingStorePutOutcomes(t *testing.T) {
	refused := errors.New("disk full")
	for _, tc := range []struct {
		name   string
		cancel bool // before the call
		put    func(ctx context.Context, cancel context.CancelFunc) error
		want   requestCounts
	}{
		{
			name: "stored",
			put:  func(context.Context, context.CancelFunc) error { return nil },
			want: requestCounts{putsStored: 1},
		},
		{
			name: "failed",
			put:  func(context.Context, context.CancelFunc) error { return refused },
			want: requestCounts{failed: 1, putsFailed: 1},
		},
		{
			name: "cancelled before", cancel: true,
			put:  func(ctx context.Context, _ context.CancelFunc) error { return ctx.Err() },
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			name: "cancelled during",
			put: func(ctx context.Context, cancel context.CancelFunc) error {
				cancel()
				<-ctx.Done()
				return ctx.Err()
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			name: "store error after the caller stopped",
			put: func(_ context.Context, cancel context.CancelFunc) error {
				cancel()
				return refused
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			name: "success after the caller stopped",
			put: func(_ context.Context, cancel context.CancelFunc) error {
				cancel()
				return nil
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			st, calls := acctCountingStore(&fakeStore{put: func(ctx context.Context) error { return tc.put(ctx, cancel) }})
			_, _ = st.Put(ctx, "k", []byte("abc"))
			want := tc.want
			want.outcomes, want.puts, want.bytesUp = true, 1, 3
			got := calls.requests()
			assert.Equal(t, want, got)
			requireBalanced(t, got)
		})
	}
}

// A GET that returns its bytes after its caller stopped waiting is given
// up on, as a PUT is; its bytes were still downloaded.
func TestAcctCountingStoreGetAfterCallerStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, calls := acctCountingStore(&fakeStore{get: func(context.Context) error { cancel(); return nil }})
	_, err := st.GetRange(ctx, metadata.ObjectRef{Bucket: "b1", Key: "k"}, 0, 7)
	require.NoError(t, err)
	assert.Equal(t, requestCounts{outcomes: true, gets: 1, givenUp: 1, bytesDown: 7}, calls.requests())
}

// A store that panics in a Put takes the panic up to the caller unchanged,
// and the PUT is not counted as stored.
func TestAcctCountingStorePutPanics(t *testing.T) {
	st, calls := acctCountingStore(&fakeStore{put: func(context.Context) error { panic("store bug") }})
	require.PanicsWithValue(t, "store bug", func() { _, _ = st.Put(t.Context(), "k", nil) })
	c := calls.requests()
	assert.Equal(t, int64(1), c.puts)
	assert.Zero(t, c.putsStored)
}

// A store whose read panics takes the panic up unchanged, and the GET is
// counted failed: the engines recover the panic as a failed read and read
// again, and that GET must not be missing from the failed requests.
func TestAcctCountingStoreGetPanics(t *testing.T) {
	st, calls := acctCountingStore(&fakeStore{get: func(context.Context) error { panic("store bug") }})
	require.PanicsWithValue(t, "store bug", func() { _, _ = st.GetRange(t.Context(), metadata.ObjectRef{Bucket: "b1", Key: "k"}, 0, 1) })
	assert.Equal(t, requestCounts{outcomes: true, gets: 1, failed: 1}, calls.requests())
}

// Many brokers' Puts at once, twins of a hedge among them, each ending its
// own way: the counters sum exactly, with -race.
func TestAcctCountingStoreConcurrent(t *testing.T) {
	refused := errors.New("refused")
	const n = 400
	st, calls := acctCountingStore(&fakeStore{put: func(ctx context.Context) error {
		switch key := ctx.Value(acctKey{}).(int); key % 4 {
		case 0, 1: // stored, twice per hedged pair
			return nil
		case 2:
			return refused
		default:
			return ctx.Err()
		}
	}})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), acctKey{}, i))
			defer cancel()
			if i%4 == 3 {
				cancel()
			}
			_, _ = st.Put(ctx, "k", []byte{1})
		})
	}
	wg.Wait()
	c := calls.requests()
	requireBalanced(t, c)
	assert.Equal(t, requestCounts{outcomes: true, puts: n, bytesUp: n, putsStored: n / 2, failed: n / 4, putsFailed: n / 4, givenUp: n / 4, putsGivenUp: n / 4}, c)
}

type acctKey struct{}

// roundTrip is an aws.HTTPClient that answers with do.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) Do(r *http.Request) (*http.Response, error) { return f(r) }

// acctS3 is an accountingClient over do, for a deployment with one bucket
// b1 in az1.
func acctS3(do roundTrip) (*accountingClient, *s3Objects) {
	s := &s3Objects{
		azs: []string{"az1"}, opts: s3express.Options{Buckets: map[string]string{"az1": "b1"}},
		azOf: map[string]string{"b1": "az1"}, outage: faults.NewOutage(storage.ErrUnavailable),
	}
	return &accountingClient{next: do, s: s}, s
}

// putRequest is a PutObject attempt of ctx's caller, as the SDK sends it.
func putRequest(t *testing.T, ctx context.Context, op string) *http.Request {
	t.Helper()
	ctx = awsmiddleware.SetOperationName(ctx, op)
	r, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://s3.test/b1/k", strings.NewReader("abcd"))
	require.NoError(t, err)
	return r
}

// errBody is an answer's body whose read fails.
type errBody struct{ closed int }

func (b *errBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (b *errBody) Close() error             { b.closed++; return nil }

func answer(code int, body io.ReadCloser) *http.Response {
	if body == nil {
		body = io.NopCloser(strings.NewReader(""))
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: body}
}

// Every S3 PUT attempt ends one way, by when its caller stopped waiting:
// before the attempt, during it, as the answer arrives, or after it but
// before the SDK has closed the answer; and by what the store answered.
func TestAcctS3PutOutcomes(t *testing.T) {
	type step func(ctx context.Context, cancel context.CancelFunc, r *http.Request) (*http.Response, error)
	netErr := &url.Error{Op: "Put", URL: "http://s3.test/b1/k", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		name        string
		before      bool // cancel before the attempt
		afterAnswer bool // cancel once Do returned, before Close
		do          step
		want        requestCounts
	}{
		{
			name: "stored",
			do: func(context.Context, context.CancelFunc, *http.Request) (*http.Response, error) {
				return answer(200, nil), nil
			},
			want: requestCounts{putsStored: 1},
		},
		{
			name: "cancelled before", before: true,
			do: func(ctx context.Context, _ context.CancelFunc, _ *http.Request) (*http.Response, error) {
				return nil, ctx.Err()
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			name: "cancelled during",
			do: func(ctx context.Context, cancel context.CancelFunc, _ *http.Request) (*http.Response, error) {
				cancel()
				return nil, &url.Error{Op: "Put", URL: "http://s3.test/b1/k", Err: ctx.Err()}
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			name: "cancelled as the answer arrives",
			do: func(_ context.Context, cancel context.CancelFunc, _ *http.Request) (*http.Response, error) {
				cancel()
				return answer(200, nil), nil
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			name: "cancelled before the answer is closed", afterAnswer: true,
			do: func(context.Context, context.CancelFunc, *http.Request) (*http.Response, error) {
				return answer(200, nil), nil
			},
			want: requestCounts{givenUp: 1, putsGivenUp: 1},
		},
		{
			// The SDK drains a PUT's answer and ignores a failed read
			// (it only logs it): the caller has its success.
			name: "2xx whose body read fails",
			do: func(context.Context, context.CancelFunc, *http.Request) (*http.Response, error) {
				return answer(200, &errBody{}), nil
			},
			want: requestCounts{putsStored: 1},
		},
		{
			name: "5xx",
			do: func(context.Context, context.CancelFunc, *http.Request) (*http.Response, error) {
				return answer(503, nil), nil
			},
			want: requestCounts{failed: 1, putsFailed: 1},
		},
		{
			// The store's own answer, even once the caller stopped.
			name: "5xx after the caller stopped",
			do: func(_ context.Context, cancel context.CancelFunc, _ *http.Request) (*http.Response, error) {
				cancel()
				return answer(500, nil), nil
			},
			want: requestCounts{failed: 1, putsFailed: 1},
		},
		{
			name: "transport error",
			do:   func(context.Context, context.CancelFunc, *http.Request) (*http.Response, error) { return nil, netErr },
			want: requestCounts{failed: 1, putsFailed: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.before {
				cancel()
			}
			c, s := acctS3(func(r *http.Request) (*http.Response, error) { return tc.do(r.Context(), cancel, r) })
			resp, err := c.Do(putRequest(t, ctx, "PutObject"))
			if tc.afterAnswer {
				cancel()
			}
			if err == nil {
				// As the SDK does: drain, close, and close again harmlessly.
				_, _ = io.Copy(io.Discard, resp.Body)
				require.NoError(t, resp.Body.Close())
				require.NoError(t, resp.Body.Close())
			}
			got := s.requests()
			want := tc.want
			want.outcomes, want.puts, want.bytesUp = true, 1, 4
			assert.Equal(t, want, got)
			requireBalanced(t, got)
		})
	}
}

// An attempt refused by the simulated outage fails, whether or not its
// caller still waits.
func TestAcctS3OutageFailsEvenGivenUp(t *testing.T) {
	c, s := acctS3(func(*http.Request) (*http.Response, error) { panic("not sent") })
	require.NoError(t, s.setOutage("az1"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Do(putRequest(t, ctx, "PutObject"))
	require.Error(t, err)
	assert.Equal(t, requestCounts{outcomes: true, puts: 1, bytesUp: 4, failed: 1, putsFailed: 1}, s.requests())
}

// Many PUT attempts at once, some hedged twins both answered with
// success, some failed, some given up, with -race: the counters sum
// exactly, each answer counted once however often it is closed.
func TestAcctS3Concurrent(t *testing.T) {
	const n = 400
	c, s := acctS3(func(r *http.Request) (*http.Response, error) {
		switch r.Context().Value(acctKey{}).(int) % 4 {
		case 0, 1:
			return answer(200, nil), nil
		case 2:
			return answer(503, nil), nil
		default:
			return nil, r.Context().Err()
		}
	})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), acctKey{}, i))
			defer cancel()
			if i%4 == 3 {
				cancel()
			}
			resp, err := c.Do(putRequest(t, ctx, "PutObject"))
			if err != nil {
				return
			}
			var closers sync.WaitGroup
			for range 3 {
				closers.Go(func() { _ = resp.Body.Close() })
			}
			closers.Wait()
		})
	}
	wg.Wait()
	got := s.requests()
	requireBalanced(t, got)
	assert.Equal(t, requestCounts{outcomes: true, puts: n, bytesUp: 4 * n, putsStored: n / 2, failed: n / 4, putsFailed: n / 4, givenUp: n / 4, putsGivenUp: n / 4}, got)
}

// The report's fields that tell the requests and PUTs apart are named, as
// the JSON spells them, in the package documentation and in docs/demo.md.
func TestAcctReportFieldsDocumented(t *testing.T) {
	var fields []string
	report := reflect.TypeFor[demoReport]()
	for _, name := range []string{"GivenUpRequests", "PutOutcomes"} {
		f, ok := report.FieldByName(name)
		require.True(t, ok, name)
		fields = append(fields, strings.TrimSuffix(f.Tag.Get("json"), ",omitempty"))
	}
	for f := range reflect.TypeFor[putOutcomes]().Fields() {
		fields = append(fields, f.Tag.Get("json"))
	}
	for _, path := range []string{"doc.go", "../../docs/demo.md"} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, field := range fields {
			assert.Regexp(t, `\b`+field+`\b`, string(b), "%s names %s", path, field)
		}
	}
}
