package gcsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gcs "cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/activetier/activetier/internal/storeutil"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Defaults for Options fields left zero.
const (
	DefaultRequestTimeout    = 10 * time.Second
	DefaultMaxAttempts       = 3
	DefaultDeleteConcurrency = 16
	DefaultMaxBackoff        = 2 * time.Second
)

// firstBackoff is the ceiling of the first retry's jittered delay; each
// later retry doubles it, up to Options.MaxBackoff.
const firstBackoff = 50 * time.Millisecond

// listPageSize is the JSON API's largest page.
const listPageSize = 1000

// Options configures a Store. Buckets and LocalAZ are required; every other
// field has a default suited to Cloud Storage.
type Options struct {
	// Buckets maps each zone of the deployment ("us-central1-a") to its
	// bucket: a zonal (Rapid) bucket placed in that zone, or any other
	// bucket standing for it. Every broker of a deployment must use the
	// same map: object references carry the zone and bucket, and a store
	// reads only the buckets it knows.
	Buckets map[string]string
	// LocalAZ is this broker's zone: Put writes to Buckets[LocalAZ].
	LocalAZ string
	// KeyPrefix is prepended to every object name on the wire and
	// stripped from keys in references and listings, so that several
	// deployments can share buckets. It must be the same for every
	// broker of a deployment.
	KeyPrefix string

	// Endpoint is the base URL of a Cloud Storage emulator
	// ("http://127.0.0.1:4443"), reached without authentication. Empty
	// means Cloud Storage itself with Application Default Credentials, or
	// the emulator STORAGE_EMULATOR_HOST names, which the client library
	// reads by itself. Never set it for Cloud Storage.
	Endpoint string
	// GRPC selects the client library's gRPC transport, which zonal
	// (Rapid) buckets require; the default is the JSON and XML APIs over
	// HTTP.
	GRPC bool

	// RequestTimeout bounds each attempt, reading the answer included;
	// an attempt that times out is retried. Zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxAttempts is how many attempts an operation makes while its
	// failures are transient (storage.ErrUnavailable). Zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps the jittered delay between attempts. Zero means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// DeleteConcurrency is how many DELETE requests one Delete call keeps
	// in flight: Cloud Storage deletes one object per request. Zero means
	// DefaultDeleteConcurrency.
	DeleteConcurrency int

	// ClientOptions are passed to the client library's constructor after
	// the store's own (credentials file, HTTP client, ...).
	ClientOptions []option.ClientOption
}

// Store is a storage.ObjectStore on Google Cloud Storage: one bucket per
// zone, zonal (Rapid) buckets or any other. It is safe for concurrent use.
type Store struct {
	client      *gcs.Client
	transport   *http.Transport   // nil for the gRPC client
	buckets     map[string]string // bucket -> zone
	local       metadata.ObjectRef
	prefix      string
	timeout     time.Duration
	maxAttempts int
	maxBackoff  time.Duration
	deleteConc  int
}

var (
	_ storage.ObjectStore = (*Store)(nil)
	_ storage.RangeReader = (*Store)(nil)
)

// New validates opts and creates the client. It makes no request: a
// missing bucket or missing permissions show on first use, as
// storage.ErrPermanent.
func New(ctx context.Context, opts Options) (*Store, error) {
	buckets, err := validate(opts)
	if err != nil {
		return nil, err
	}
	clientOpts := []option.ClientOption{}
	if opts.Endpoint != "" {
		clientOpts = append(clientOpts,
			option.WithEndpoint(strings.TrimSuffix(opts.Endpoint, "/")+"/storage/v1/"),
			option.WithoutAuthentication())
	}
	if opts.GRPC {
		clientOpts = append(clientOpts, gcs.WithDisabledClientMetrics())
	}
	clientOpts = append(clientOpts, opts.ClientOptions...)
	var client *gcs.Client
	var transport *http.Transport
	if opts.GRPC {
		client, err = gcs.NewGRPCClient(ctx, clientOpts...)
	} else {
		var hc *http.Client
		hc, transport, err = newHTTPClient(ctx, opts.Endpoint, clientOpts)
		if err == nil {
			client, err = gcs.NewClient(ctx, append(clientOpts, option.WithHTTPClient(hc))...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gcsstore: creating the Cloud Storage client: %w", err)
	}
	// The store makes its own attempts, so that each is bounded by
	// RequestTimeout and counted; the library's retries, which go on
	// until the context ends, are off.
	client.SetRetry(gcs.WithPolicy(gcs.RetryNever))
	return &Store{
		client:      client,
		transport:   transport,
		buckets:     buckets,
		local:       metadata.ObjectRef{AZ: opts.LocalAZ, Bucket: opts.Buckets[opts.LocalAZ]},
		prefix:      opts.KeyPrefix,
		timeout:     cmp(opts.RequestTimeout, DefaultRequestTimeout),
		maxAttempts: cmp(opts.MaxAttempts, DefaultMaxAttempts),
		maxBackoff:  cmp(opts.MaxBackoff, DefaultMaxBackoff),
		deleteConc:  cmp(opts.DeleteConcurrency, DefaultDeleteConcurrency),
	}, nil
}

// newHTTPClient builds the HTTP client the library sends requests
// through: its own transport, so that Close can close the idle
// connections, under the library's authentication (Application Default
// Credentials), or none for an emulator.
func newHTTPClient(ctx context.Context, endpoint string, clientOpts []option.ClientOption) (*http.Client, *http.Transport, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	// As the library's own transport: a burst of ranged reads to one
	// bucket would otherwise dial again past the default of 2.
	base.MaxIdleConnsPerHost = 100
	authOpts := clientOpts
	if endpoint == "" && os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		authOpts = append([]option.ClientOption{option.WithScopes(gcs.ScopeFullControl)}, clientOpts...)
	} else {
		authOpts = append([]option.ClientOption{option.WithoutAuthentication()}, clientOpts...)
	}
	rt, err := htransport.NewTransport(ctx, rangeChecker{base}, authOpts...)
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: rt}, base, nil
}

// rangeChecker refuses an answer to a ranged read that starts elsewhere
// than the request asked, or runs past its end. The library resumes a read
// whose body was cut short with a ranged request from where it stopped, and
// reads that answer without looking at its Content-Range; checking every
// answer here turns one that holds other bytes into a failed attempt.
type rangeChecker struct{ next http.RoundTripper }

func (c rangeChecker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusPartialContent {
		return resp, err
	}
	first, last, ok := parseRange(req.Header.Get("Range"))
	if !ok {
		return resp, nil
	}
	gotFirst, gotLast, _, err := storeutil.ParseContentRange(resp.Header.Get("Content-Range"))
	if err == nil && (gotFirst != first || gotLast > last) {
		err = fmt.Errorf("asked for bytes %d-%d, answered %q", first, last, resp.Header.Get("Content-Range"))
	}
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("gcsstore: ranged read of %s: %w", req.URL.Path, err)
	}
	return resp, nil
}

// parseRange parses a request's "bytes=first-last".
func parseRange(s string) (first, last int64, ok bool) {
	spec, ok := strings.CutPrefix(s, "bytes=")
	a, b, ok2 := strings.Cut(spec, "-")
	if !ok || !ok2 {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	return first, last, err1 == nil && err2 == nil
}

// cmp returns v, or def when v is zero.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// validate checks opts and returns the bucket-to-zone map.
func validate(opts Options) (map[string]string, error) {
	if len(opts.Buckets) == 0 {
		return nil, errors.New("gcsstore: Options.Buckets is empty")
	}
	byBucket := make(map[string]string, len(opts.Buckets))
	for _, zone := range slices.Sorted(maps.Keys(opts.Buckets)) {
		name := opts.Buckets[zone]
		if err := checkZone(zone); err != nil {
			return nil, fmt.Errorf("gcsstore: Options.Buckets: %w", err)
		}
		if err := checkBucketName(name); err != nil {
			return nil, fmt.Errorf("gcsstore: Options.Buckets[%q]: %w", zone, err)
		}
		if other, dup := byBucket[name]; dup {
			return nil, fmt.Errorf("gcsstore: Options.Buckets: bucket %q is mapped from both %q and %q", name, other, zone)
		}
		byBucket[name] = zone
	}
	if _, ok := opts.Buckets[opts.LocalAZ]; !ok {
		return nil, fmt.Errorf("gcsstore: Options.LocalAZ %q is not a zone of Options.Buckets", opts.LocalAZ)
	}
	switch {
	case len(opts.KeyPrefix) >= maxKeyBytes:
		return nil, fmt.Errorf("gcsstore: Options.KeyPrefix is %d bytes; keys with it must fit in %d", len(opts.KeyPrefix), maxKeyBytes)
	case opts.KeyPrefix != "" && keyProblem("", opts.KeyPrefix) != "":
		return nil, fmt.Errorf("gcsstore: Options.KeyPrefix: %s", keyProblem("", opts.KeyPrefix))
	case opts.RequestTimeout < 0:
		return nil, errors.New("gcsstore: Options.RequestTimeout is negative")
	case opts.MaxAttempts < 0:
		return nil, errors.New("gcsstore: Options.MaxAttempts is negative")
	case opts.MaxBackoff < 0:
		return nil, errors.New("gcsstore: Options.MaxBackoff is negative")
	case opts.DeleteConcurrency < 0:
		return nil, errors.New("gcsstore: Options.DeleteConcurrency is negative")
	case opts.Endpoint != "" && !strings.HasPrefix(opts.Endpoint, "http://") && !strings.HasPrefix(opts.Endpoint, "https://"):
		return nil, fmt.Errorf("gcsstore: Options.Endpoint %q is not an http:// or https:// URL", opts.Endpoint)
	}
	return byBucket, nil
}

// Client returns the Cloud Storage client, for operations outside the
// ObjectStore contract (creating buckets, lifecycle rules). Its retries
// are off: the store makes its own attempts.
func (s *Store) Client() *gcs.Client { return s.client }

// Close closes the client and its idle connections. The store is unusable
// afterwards.
func (s *Store) Close() error {
	err := s.client.Close()
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	return err
}

// Local returns the zone and bucket Put writes to.
func (s *Store) Local() metadata.ObjectRef { return s.local }

// attempt runs fn up to MaxAttempts times, each under a context that ends
// after RequestTimeout, while fn's error is transient, with jittered
// exponential backoff between attempts. It returns nil, the caller's
// context error (callerError), or the last attempt's error classified
// (newError).
func (s *Store) attempt(ctx context.Context, op, bucket, key string, fn func(ctx context.Context) error) error {
	var err error
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeoutCause(ctx, s.timeout, errAttemptTimeout)
		err = fn(actx)
		timedOut := errors.Is(context.Cause(actx), errAttemptTimeout)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return callerError(ctx, op, bucket, key, n, err)
		}
		if timedOut {
			err = fmt.Errorf("%w: %w", errAttemptTimeout, storeutil.HideContextErr(err))
		}
		e := newError(op, bucket, key, n, err)
		if e.Kind != storage.ErrUnavailable || n >= s.maxAttempts {
			return e
		}
		if !s.sleep(ctx, n) {
			return callerError(ctx, op, bucket, key, n, err)
		}
	}
}

// sleep waits before attempt n+1: full jitter over an exponentially
// growing ceiling. It reports false if ctx ended first.
func (s *Store) sleep(ctx context.Context, n int) bool {
	ceiling := min(firstBackoff<<min(n-1, 20), s.maxBackoff)
	t := time.NewTimer(rand.N(ceiling) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Put stores body under key in the local zone's bucket, only if no object
// has that name (ifGenerationMatch=0): a taken key is
// storage.ErrAlreadyExists and the object is left as it was. The upload
// is one request carrying the body's CRC32C, which Cloud Storage verifies
// before storing. When an attempt's answer was lost, Put reads the key back
// to learn whether its own write landed (see the package documentation).
func (s *Store) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	const op = "Put"
	ref := s.local
	ref.Key = key
	if err := s.checkKey(op, ref.Bucket, key); err != nil {
		return metadata.ObjectRef{}, err
	}
	if err := ctx.Err(); err != nil {
		return metadata.ObjectRef{}, callerError(ctx, op, ref.Bucket, key, 0, nil)
	}
	obj := s.client.Bucket(ref.Bucket).Object(s.prefix + key).If(gcs.Conditions{DoesNotExist: true})
	crc := crc32.Checksum(body, castagnoli)
	var maybeStored bool
	err := s.attempt(ctx, op, ref.Bucket, key, func(ctx context.Context) error {
		err := upload(ctx, obj, body, crc)
		if err != nil && !storeutil.NeverSent(err) && !refused(err) {
			maybeStored = true
		}
		return err
	})
	if err == nil {
		return ref, nil
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind == nil || !maybeStored ||
		e.Kind != storage.ErrAlreadyExists && e.Kind != storage.ErrUnavailable {
		// Refused, never sent, or the caller gave up: nothing to learn
		// by reading back.
		return metadata.ObjectRef{}, err
	}
	// Some attempt may have stored the object without its answer
	// arriving: a timeout, a 5xx, a connection cut. The key is read back:
	// our exact bytes mean success (a retry then found the key taken by
	// its own earlier attempt), another object ErrAlreadyExists, and no
	// way to tell ErrUnavailable.
	switch s.readBack(ctx, ref.Bucket, key, body) {
	case storeutil.StoredOurs:
		return ref, nil
	case storeutil.StoredOther:
		e.Kind = storage.ErrAlreadyExists
		e.Err = fmt.Errorf("the key holds another object (read back after: %w)", e.Err)
	default:
		if ctx.Err() != nil {
			return metadata.ObjectRef{}, callerError(ctx, op, ref.Bucket, key, e.Attempts, e.Err)
		}
		e.Kind = storage.ErrUnavailable
		e.Err = fmt.Errorf("the object may or may not be stored; reading it back did not tell: %w", e.Err)
	}
	return metadata.ObjectRef{}, e
}

// upload makes one upload request of body.
func upload(ctx context.Context, obj *gcs.ObjectHandle, body []byte, crc uint32) error {
	w := obj.NewWriter(ctx)
	// One request, not a resumable session: objects are small, and a
	// failed attempt is retried whole.
	w.ChunkSize = 0
	// Set, so that the library does not sniff the body for a type.
	w.ContentType = "application/octet-stream"
	w.CRC32C = crc
	w.SendCRC32C = true
	if _, err := w.Write(body); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// readBack reads the object at key and compares it with body, with the
// store's attempts.
func (s *Store) readBack(ctx context.Context, bucket, key string, body []byte) storeutil.Stored {
	found := storeutil.StoredUnknown
	obj := s.client.Bucket(bucket).Object(s.prefix + key)
	err := s.attempt(ctx, "Put", bucket, key, func(ctx context.Context) error {
		r, err := obj.NewReader(ctx)
		if err != nil {
			return err
		}
		defer r.Close()
		// By the bytes alone, as s3express does: a size header that
		// disagrees proves nothing. One byte more than body is
		// another object; fewer, all matching, an answer cut short.
		got, err := io.ReadAll(io.LimitReader(r, int64(len(body))+1))
		switch {
		case len(got) > len(body) || !bytes.Equal(got, body[:len(got)]):
			found = storeutil.StoredOther
			return nil
		case err != nil:
			return err
		case len(got) < len(body):
			return fmt.Errorf("read-back ended after %d of %d bytes: %w", len(got), len(body), io.ErrUnexpectedEOF)
		}
		found = storeutil.StoredOurs
		return nil
	})
	if err != nil {
		return storeutil.StoredUnknown
	}
	return found
}

// GetRange reads bytes [offset, offset+length) of the object ref names with
// one ranged read. It checks the range's arguments and that the store knows
// ref's bucket before making any request. A range that is not wholly inside
// the object is storage.ErrInvalidRange: Cloud Storage answers a range
// that starts inside the object but ends past it with the shorter range,
// which GetRange refuses rather than return fewer bytes.
func (s *Store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	return s.get(ctx, "GetRange", ref, offset, length, nil)
}

// ReadRange is GetRange into dst, as storage.RangeReader says: each
// attempt reads the answer with io.ReadFull straight into dst, within the
// attempt, so that once ReadRange returns nothing writes to dst; a failed
// attempt may have written part of it, which the next overwrites. It
// returns len(dst), or 0 with an error.
func (s *Store) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	if _, err := s.get(ctx, "ReadRange", ref, offset, int64(len(dst)), dst); err != nil {
		return 0, err
	}
	return len(dst), nil
}

// get is GetRange and ReadRange: it reads into dst if it is not nil (then
// of length bytes), and otherwise into a slice allocated once the answer
// shows it holds the range.
func (s *Store) get(ctx context.Context, op string, ref metadata.ObjectRef, offset, length int64, dst []byte) ([]byte, error) {
	if length <= 0 || offset < 0 || offset > maxInt64-length {
		return nil, &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrInvalidRange,
			Err: fmt.Errorf("offset %d, length %d: want offset >= 0, length > 0 and no overflow", offset, length)}
	}
	if err := s.checkRef(op, ref); err != nil {
		return nil, err
	}
	if err := s.checkKey(op, ref.Bucket, ref.Key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, callerError(ctx, op, ref.Bucket, ref.Key, 0, nil)
	}
	obj := s.client.Bucket(ref.Bucket).Object(s.prefix + ref.Key)
	var buf []byte
	err := s.attempt(ctx, op, ref.Bucket, ref.Key, func(ctx context.Context) error {
		r, err := obj.NewRangeReader(ctx, offset, length)
		if err != nil {
			return err
		}
		defer r.Close()
		buf, err = readRange(r, offset, length, dst)
		return err
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

const maxInt64 = 1<<63 - 1

// readRange reads exactly length bytes at offset from a ranged read, after
// checking what the answer says it holds, into dst, or into a new slice if
// dst is nil. An answer that disagrees with
// the request is transient, like a body cut short; only an object too
// short for the range is ErrInvalidRange.
func readRange(r *gcs.Reader, offset, length int64, dst []byte) ([]byte, error) {
	switch size := r.Attrs.Size; {
	case size >= 0 && size < offset+length:
		return nil, &rangeError{kind: storage.ErrInvalidRange, err: fmt.Errorf("object is %d bytes, range ends at %d", size, offset+length)}
	case r.Attrs.StartOffset != offset || r.Remain() != length:
		return nil, &rangeError{kind: storage.ErrUnavailable, err: fmt.Errorf("server answered %d bytes at %d for %d bytes at %d", r.Remain(), r.Attrs.StartOffset, length, offset)}
	}
	if dst == nil {
		dst = make([]byte, length)
	}
	if n, err := io.ReadFull(r, dst); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("answer ended after %d of %d bytes: %w", n, length, err)
	}
	return dst, nil
}

// Delete removes the objects refs name, one DELETE per object, up to
// Options.DeleteConcurrency at once. Every ref's bucket is checked before
// any request; a key Cloud Storage cannot take is reported (ErrInvalidKey)
// and the other keys are still deleted. Missing objects are not errors. A delete that fails with
// storage.ErrUnavailable or storage.ErrPermanent stops the deletes of
// its bucket, not of the others; failures are reported, at most ten keys
// by name (the rest counted).
func (s *Store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	const op = "Delete"
	type item struct{ bucket, key string }
	var items []item
	var invalid []error
	seen := map[item]bool{}
	for _, ref := range refs {
		if err := s.checkRef(op, ref); err != nil {
			return err
		}
	}
	for _, ref := range refs {
		if err := s.checkKey(op, ref.Bucket, ref.Key); err != nil {
			// Reported; the other keys are still deleted, so that
			// one bad name never blocks garbage collection.
			invalid = append(invalid, err)
			continue
		}
		it := item{ref.Bucket, ref.Key}
		if !seen[it] {
			seen[it] = true
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return errors.Join(invalid...)
	}
	if err := ctx.Err(); err != nil {
		return callerError(ctx, op, items[0].bucket, items[0].key, 0, nil)
	}
	stopped := map[string]*atomic.Bool{}
	for _, it := range items {
		if stopped[it.bucket] == nil {
			stopped[it.bucket] = new(atomic.Bool)
		}
	}
	var (
		mu      sync.Mutex
		errs    = invalid // and the first maxReportedKeys failures
		failed  int
		skipped = map[string]int{}
		wg      sync.WaitGroup
	)
	work := make(chan item)
	for range min(s.deleteConc, len(items)) {
		wg.Go(func() {
			for it := range work {
				if stopped[it.bucket].Load() || ctx.Err() != nil {
					mu.Lock()
					skipped[it.bucket]++
					mu.Unlock()
					continue
				}
				obj := s.client.Bucket(it.bucket).Object(s.prefix + it.key)
				err := s.attempt(ctx, op, it.bucket, it.key, obj.Delete)
				var e *Error
				if err == nil || errors.As(err, &e) && e.Kind == storage.ErrNotFound {
					continue
				}
				if e.Kind == storage.ErrUnavailable || e.Kind == storage.ErrPermanent {
					stopped[it.bucket].Store(true)
				}
				mu.Lock()
				failed++
				if len(errs)-len(invalid) < maxReportedKeys {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	if reported := len(errs) - len(invalid); failed > reported {
		errs = append(errs, fmt.Errorf("gcsstore: Delete: %d more keys could not be deleted", failed-reported))
	}
	for _, b := range slices.Sorted(maps.Keys(skipped)) {
		errs = append(errs, fmt.Errorf("gcsstore: Delete %s: %d keys not attempted after an earlier failure", b, skipped[b]))
	}
	if ctx.Err() != nil && len(errs) > 0 {
		errs = append(errs, callerError(ctx, op, items[0].bucket, items[0].key, 0, nil))
	}
	return errors.Join(errs...)
}

// maxReportedKeys bounds how many per-key Delete failures are reported by
// name.
const maxReportedKeys = 10

// List returns the objects of bucket whose keys (without Options.KeyPrefix)
// start with prefix, in no particular order. It reads every page, each
// page with the store's attempts.
func (s *Store) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	const op = "List"
	zone, ok := s.buckets[bucket]
	if !ok {
		return nil, s.unknownBucket(op, bucket, prefix)
	}
	if err := ctx.Err(); err != nil {
		return nil, callerError(ctx, op, bucket, prefix, 0, nil)
	}
	full := s.prefix + prefix
	q := &gcs.Query{Prefix: full}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, &Error{Op: op, Bucket: bucket, Key: prefix, Kind: storage.ErrPermanent, Err: err}
	}
	h := s.client.Bucket(bucket)
	var infos []storage.ObjectInfo
	seenTokens := map[string]bool{}
	token := ""
	for {
		var page []*gcs.ObjectAttrs
		var next string
		err := s.attempt(ctx, op, bucket, prefix, func(ctx context.Context) error {
			page, next = page[:0], ""
			// Next fetches one page (a server's empty pages are
			// skipped) and returns its items without fetching again
			// while any remain; the library's Pager would instead
			// keep fetching until it has a full page.
			it := h.Objects(ctx, q)
			pi := it.PageInfo()
			pi.MaxSize, pi.Token = listPageSize, token
			for {
				a, err := it.Next()
				if errors.Is(err, iterator.Done) {
					return nil
				}
				if err != nil {
					return err
				}
				page = append(page, a)
				if pi.Remaining() == 0 {
					next = pi.Token
					return nil
				}
			}
		})
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			if !strings.HasPrefix(a.Name, full) {
				continue
			}
			infos = append(infos, storage.ObjectInfo{
				Ref:          metadata.ObjectRef{AZ: zone, Bucket: bucket, Key: a.Name[len(s.prefix):]},
				Size:         a.Size,
				LastModified: a.Updated,
			})
		}
		if next == "" {
			return infos, nil
		}
		if seenTokens[next] {
			// A server that hands out a token twice would list forever.
			return nil, &Error{Op: op, Bucket: bucket, Key: prefix, Kind: storage.ErrUnavailable,
				Err: fmt.Errorf("the server returned page token %q twice", next)}
		}
		seenTokens[next] = true
		token = next
	}
}

// checkRef refuses references to buckets the store was not configured
// with, or to a configured bucket under another zone's name.
func (s *Store) checkRef(op string, ref metadata.ObjectRef) error {
	zone, ok := s.buckets[ref.Bucket]
	if !ok {
		return s.unknownBucket(op, ref.Bucket, ref.Key)
	}
	if ref.AZ != "" && ref.AZ != zone {
		return &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrUnknownBucket,
			Err: fmt.Errorf("the reference names zone %q, but the bucket is configured for zone %q", ref.AZ, zone)}
	}
	return nil
}

func (s *Store) unknownBucket(op, bucket, key string) error {
	return &Error{Op: op, Bucket: bucket, Key: key, Kind: storage.ErrUnknownBucket,
		Err: fmt.Errorf("configured buckets are %s", strings.Join(slices.Sorted(maps.Keys(s.buckets)), ", "))}
}

// checkKey refuses keys Cloud Storage would reject, before any request.
func (s *Store) checkKey(op, bucket, key string) error {
	if why := keyProblem(s.prefix, key); why != "" {
		return &Error{Op: op, Bucket: bucket, Key: key, Kind: ErrInvalidKey, Err: errors.New(why)}
	}
	return nil
}
