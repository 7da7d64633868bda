package s3express

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/activetier/activetier/internal/storeutil"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Defaults for Options fields left zero.
const (
	DefaultConcurrency = 64
	// DefaultFirstByteTimeout and DefaultMinThroughput make the
	// per-attempt timeout of a request when Options.RequestTimeout is
	// zero: DefaultFirstByteTimeout plus the time to move the request's
	// body at DefaultMinThroughput bytes per second. Two seconds is what
	// Amazon's "Performance design patterns for Amazon S3" advises for
	// retrying a small GET or PUT; for a large one it advises judging by
	// throughput. A request merely slow is the engines' to hedge (they
	// re-issue one that overstays its learned p95, within milliseconds
	// on S3 Express); the timeout only ends an attempt on a connection
	// that stopped moving, so the SDK's retry makes progress instead of
	// waiting out a flat timeout sized for the largest body.
	DefaultFirstByteTimeout = 2 * time.Second
	DefaultMinThroughput    = 8 << 20
)

// S3 limits the store checks before sending anything.
const (
	maxKeyBytes      = 1024
	maxDeleteObjects = 1000
)

// SSE selects the server-side encryption Put asks for.
type SSE int

const (
	// SSEBucketDefault sends no encryption header, leaving the choice to
	// the bucket's default encryption. It is the default: a directory
	// bucket refuses every PUT whose encryption headers differ from its
	// default encryption configuration, so a header the store sent on
	// its own would fail every upload to a bucket configured for SSE-KMS.
	// AWS buckets always encrypt, with SSE-S3 unless configured otherwise.
	SSEBucketDefault SSE = iota
	// SSES3 sends x-amz-server-side-encryption: AES256 (S3-managed keys).
	// Set it only where the bucket's default is SSE-S3, or for a standard
	// bucket whose default must be overridden.
	SSES3
	// SSEKMS sends aws:kms with Options.KMSKeyID (empty: the bucket's
	// default key) and S3 Bucket Keys enabled, which keeps KMS requests,
	// and their cost, per bucket instead of per object. A directory
	// bucket accepts only the KMS key of its default encryption
	// configuration.
	SSEKMS
)

// String names the mode as in configuration files and flags.
func (m SSE) String() string {
	switch m {
	case SSES3:
		return "sse-s3"
	case SSEKMS:
		return "sse-kms"
	case SSEBucketDefault:
		return "bucket-default"
	}
	return fmt.Sprintf("SSE(%d)", int(m))
}

// Options configures a Store. Buckets and LocalAZ are required; every other
// field has a default suited to S3 Express One Zone on AWS.
type Options struct {
	// Buckets maps each AZ id of the deployment ("use1-az4") to its
	// bucket. A directory bucket's name ("base--use1-az4--x-s3") must
	// embed the AZ id it is mapped from; standard (general purpose) bucket
	// names may be mapped from any AZ name. Every broker of a deployment
	// must use the same map: object references carry the AZ and bucket,
	// and a store reads only the buckets it knows.
	Buckets map[string]string
	// LocalAZ is this broker's AZ: Put writes to Buckets[LocalAZ].
	LocalAZ string
	// KeyPrefix is prepended to every key on the wire and stripped from
	// keys in references and listings, so that several deployments can
	// share buckets. Like Buckets, it must be the same for every broker of
	// a deployment. With directory buckets end it in "/": S3 Express
	// lists only "/"-terminated prefixes efficiently.
	KeyPrefix string

	// Concurrency is how many requests the caller keeps in flight per
	// bucket (uploads plus fetches). It sizes the pool of idle connections
	// per host, so that connections are reused instead of dialled again:
	// a TCP and TLS handshake costs more than an S3 Express GET. Zero
	// means DefaultConcurrency.
	Concurrency int
	// RequestTimeout bounds each HTTP attempt, reading the response body
	// included; an attempt that times out is retried by the SDK's
	// retryer. Zero means a timeout per request from its size:
	// DefaultFirstByteTimeout plus its body at DefaultMinThroughput (2.5s
	// for a 4 MiB object). It and Concurrency tune
	// the store's own HTTP client, built from aws.Config.HTTPClient when
	// that is nil or an *awshttp.BuildableClient; any other HTTP client is
	// used as given.
	RequestTimeout time.Duration

	// SSE is the server-side encryption Put asks for (default
	// SSEBucketDefault: no header, the bucket's own encryption).
	SSE SSE
	// KMSKeyID is the KMS key id or ARN for SSEKMS; it must be empty
	// otherwise.
	KMSKeyID string
	// Checksum is the checksum S3 verifies on upload:
	// types.ChecksumAlgorithmCrc32 (the default, and S3 Express's own) or
	// types.ChecksumAlgorithmCrc32c. Both are hardware-accelerated.
	// Downloads are verified by the combined-object format's own
	// per-section checksums, since S3 has no checksum for a byte range.
	Checksum types.ChecksumAlgorithm

	// S3Compatible configures the client for an S3-compatible server
	// (versitygw, MinIO, ...) at aws.Config.BaseEndpoint instead of AWS:
	// path-style addressing, and for directory bucket names no S3 Express
	// CreateSession and SigV4 signing as service "s3". Never set it for
	// AWS: S3 Express needs virtual-hosted addressing and session auth.
	S3Compatible bool

	// ClientOptions are passed to s3.NewFromConfig after the store's own,
	// so they can override them (endpoint, retryer, HTTP client, ...).
	ClientOptions []func(*s3.Options)
}

// bucket is one configured bucket and the client its requests go through.
type bucket struct {
	az     string
	kind   bucketKind
	client *s3.Client
}

// Store is a storage.ObjectStore on Amazon S3: S3 Express One Zone
// directory buckets, one per AZ, or standard buckets, or an S3-compatible
// server. It is safe for concurrent use.
type Store struct {
	local     metadata.ObjectRef
	buckets   map[string]bucket // by bucket name
	prefix    string
	checksum  types.ChecksumAlgorithm
	sse       SSE
	kmsKeyID  string
	transport *http.Transport // nil when the caller supplied the HTTP client
	timeout   time.Duration   // Options.RequestTimeout; zero: by size
}

var (
	_ storage.ObjectStore = (*Store)(nil)
	_ storage.RangeReader = (*Store)(nil)
)

// New returns a Store that makes its requests with S3 clients built from
// cfg, which carries the region and credentials (load it with
// config.LoadDefaultConfig): one client per bucket, so that each bucket has
// a retryer of its own (see the package documentation, Errors). The
// clients share one HTTP client. New validates opts and makes no request.
func New(cfg aws.Config, opts Options) (*Store, error) {
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	concurrency := orDefault(opts.Concurrency, DefaultConcurrency)
	s.timeout = opts.RequestTimeout
	var httpClient aws.HTTPClient
	httpClient, s.transport = tunedHTTPClient(cfg.HTTPClient, concurrency, len(s.buckets), s.attemptTimeout(0))

	clientOpts := []func(*s3.Options){func(o *s3.Options) {
		o.HTTPClient = httpClient
		// Expect: 100-continue on every PUT, not only above the SDK's 2 MB
		// default: a PUT that S3 can refuse from its headers (a taken
		// key, access denied) then sends no body, and the refusal arrives
		// as a response instead of a connection reset mid-body, which Go's
		// transport reports without the response. It costs one round trip
		// inside the AZ. For a server that never answers 100-continue, set
		// ContinueHeaderThresholdBytes to -1 in ClientOptions.
		o.ContinueHeaderThresholdBytes = 1
		// S3 has no checksum for a byte range, so the SDK would log that
		// it skipped validation on every ranged GET.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, retryIncompleteAnswers)
	}}
	if opts.S3Compatible {
		clientOpts = append(clientOpts, func(o *s3.Options) {
			o.UsePathStyle = true
			o.DisableS3ExpressSessionAuth = aws.Bool(true)
		}, s3.WithSigV4SigningName("s3"))
	}
	clientOpts = append(clientOpts, opts.ClientOptions...)
	clientOpts = append(clientOpts, func(o *s3.Options) {
		// S3 answers 409 ConditionalRequestConflict when another
		// conditional write of the key is in flight; a retry sees it
		// settled (412, or success if that write failed).
		o.Retryer = retry.AddWithErrorCodes(o.Retryer, "ConditionalRequestConflict")
	})
	for name, b := range s.buckets {
		b.client = s3.NewFromConfig(cfg, clientOpts...)
		s.buckets[name] = b
	}
	return s, nil
}

// newStore validates opts into a Store without a client.
func newStore(opts Options) (*Store, error) {
	if len(opts.Buckets) == 0 {
		return nil, errors.New("s3express: Options.Buckets is empty; map each AZ id to its bucket")
	}
	s := &Store{
		buckets:  make(map[string]bucket, len(opts.Buckets)),
		prefix:   opts.KeyPrefix,
		checksum: opts.Checksum,
		sse:      opts.SSE,
		kmsKeyID: opts.KMSKeyID,
	}
	for _, az := range slices.Sorted(maps.Keys(opts.Buckets)) {
		name := opts.Buckets[az]
		if az == "" || strings.TrimSpace(az) != az {
			return nil, fmt.Errorf("s3express: Options.Buckets: AZ id %q (bucket %q) must be non-empty without surrounding space", az, name)
		}
		kind, bucketAZ, err := parseBucketName(name)
		if err != nil {
			return nil, fmt.Errorf("s3express: Options.Buckets[%q]: %w", az, err)
		}
		if kind == directoryBucket && bucketAZ != az {
			return nil, fmt.Errorf("s3express: Options.Buckets[%q]: directory bucket %q is in AZ %q, not %q", az, name, bucketAZ, az)
		}
		if other, dup := s.buckets[name]; dup {
			return nil, fmt.Errorf("s3express: Options.Buckets: bucket %q is mapped from both %q and %q; each AZ needs its own", name, other.az, az)
		}
		s.buckets[name] = bucket{az: az, kind: kind}
	}
	localBucket, ok := opts.Buckets[opts.LocalAZ]
	if !ok {
		return nil, fmt.Errorf("s3express: Options.LocalAZ %q is not a key of Options.Buckets (%s)", opts.LocalAZ, strings.Join(slices.Sorted(maps.Keys(opts.Buckets)), ", "))
	}
	s.local = metadata.ObjectRef{AZ: opts.LocalAZ, Bucket: localBucket}
	if !utf8.ValidString(opts.KeyPrefix) || len(opts.KeyPrefix) >= maxKeyBytes {
		return nil, fmt.Errorf("s3express: Options.KeyPrefix %q must be valid UTF-8 and shorter than %d bytes", opts.KeyPrefix, maxKeyBytes)
	}
	if opts.Concurrency < 0 {
		return nil, fmt.Errorf("s3express: Options.Concurrency %d is negative", opts.Concurrency)
	}
	if opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("s3express: Options.RequestTimeout %v is negative", opts.RequestTimeout)
	}
	switch opts.SSE {
	case SSES3, SSEBucketDefault:
		if opts.KMSKeyID != "" {
			return nil, fmt.Errorf("s3express: Options.KMSKeyID is set but Options.SSE is %v; set SSE to SSEKMS", opts.SSE)
		}
	case SSEKMS:
	default:
		return nil, fmt.Errorf("s3express: Options.SSE %v is not SSES3, SSEKMS or SSEBucketDefault", opts.SSE)
	}
	switch opts.Checksum {
	case "":
		s.checksum = types.ChecksumAlgorithmCrc32
	case types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c:
	default:
		return nil, fmt.Errorf("s3express: Options.Checksum %q is not CRC32 or CRC32C", opts.Checksum)
	}
	return s, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// tunedHTTPClient derives the store's HTTP client from the one in
// aws.Config. A BuildableClient (what config.LoadDefaultConfig puts there)
// contributes its transport settings (proxy, TLS roots, dialer); any other
// client is the caller's to tune and is returned unchanged, with a nil
// transport.
func tunedHTTPClient(base aws.HTTPClient, concurrency, buckets int, timeout time.Duration) (aws.HTTPClient, *http.Transport) {
	var tr *http.Transport
	switch b := base.(type) {
	case nil:
		tr = awshttp.NewBuildableClient().GetTransport()
	case *awshttp.BuildableClient:
		tr = b.GetTransport()
	default:
		return base, nil
	}
	// Directory buckets are each their own host; path-style endpoints
	// share one, which the per-host limit then bounds.
	tr.MaxIdleConnsPerHost = concurrency
	tr.MaxIdleConns = concurrency * buckets
	// Object bodies are megabytes: larger buffers mean fewer syscalls.
	tr.WriteBufferSize = 64 << 10
	tr.ReadBufferSize = 64 << 10
	// Ranges must arrive as stored bytes, never transparently decoded.
	tr.DisableCompression = true
	return timedClient(tr, timeout), tr
}

// timedClient is the store's HTTP client on tr. Each attempt gets the
// timeout its request's context carries (see Store.sized), else def. The
// timeout travels in the context rather than in a client per request, so
// that a client wrapped around this one through Options.ClientOptions
// (metering, accounting, tracing) sees every request.
func timedClient(tr *http.Transport, def time.Duration) aws.HTTPClient {
	return attemptClient{def: def, c: &http.Client{
		Transport: tr,
		// The SDK handles S3's redirects (wrong region) as errors.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// attemptTimeoutKey is the context key of an attempt's timeout.
type attemptTimeoutKey struct{}

// attemptClient bounds each attempt, body included, by a timeout.
type attemptClient struct {
	def time.Duration
	c   *http.Client
}

func (a attemptClient) Do(r *http.Request) (*http.Response, error) {
	d := a.def
	if v, ok := r.Context().Value(attemptTimeoutKey{}).(time.Duration); ok && v > 0 {
		d = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	resp, err := a.c.Do(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends an attempt's timeout when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// attemptTimeout is the per-attempt timeout of a request moving n bytes
// of body (see DefaultFirstByteTimeout).
func (s *Store) attemptTimeout(n int64) time.Duration {
	if s.timeout > 0 {
		return s.timeout
	}
	return DefaultFirstByteTimeout + time.Duration(float64(n)/DefaultMinThroughput*float64(time.Second))
}

// sized gives the attempts of a request moving n bytes their timeout,
// through ctx. It changes nothing for an HTTP client the caller supplied
// in aws.Config, nor with a fixed Options.RequestTimeout.
func (s *Store) sized(ctx context.Context, n int64) context.Context {
	if s.transport == nil || s.timeout > 0 {
		return ctx
	}
	return context.WithValue(ctx, attemptTimeoutKey{}, s.attemptTimeout(n))
}

// Client returns the S3 client of the local AZ's bucket, for operations
// outside the ObjectStore contract (creating buckets, lifecycle rules). It
// can address any bucket.
func (s *Store) Client() *s3.Client { return s.buckets[s.local.Bucket].client }

// CloseIdleConnections closes the idle connections of the store's own HTTP
// transport. The store stays usable: later requests dial again. Call it
// when the store is no longer needed, so the transport's connection
// goroutines end. It does nothing for an HTTP client the caller supplied.
func (s *Store) CloseIdleConnections() {
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// Local returns the AZ and bucket Put writes to.
func (s *Store) Local() metadata.ObjectRef { return s.local }

// Put stores body under key in the local AZ's bucket, only if the key is
// free (If-None-Match: *): a taken key is storage.ErrAlreadyExists and
// the object is left as it was. The returned reference carries key as
// given; the wire key is Options.KeyPrefix + key. When an attempt's answer
// was lost, Put reads the key back to learn whether its own write landed
// (see the package documentation). body is streamed as is, without a copy;
// the SDK's request body wrapper stops all reads from it before Put
// returns, even when the server answers before reading it all.
func (s *Store) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	ref := s.local
	ref.Key = key
	if err := s.checkKey("Put", ref.Bucket, key); err != nil {
		return metadata.ObjectRef{}, err
	}
	if err := ctx.Err(); err != nil {
		return metadata.ObjectRef{}, &Error{Op: "Put", Bucket: ref.Bucket, Key: key, Err: err}
	}
	in := &s3.PutObjectInput{
		Bucket:            aws.String(ref.Bucket),
		Key:               aws.String(s.prefix + key),
		Body:              bytes.NewReader(body),
		ContentLength:     aws.Int64(int64(len(body))),
		IfNoneMatch:       aws.String("*"),
		ChecksumAlgorithm: s.checksum,
	}
	switch s.sse {
	case SSES3:
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	case SSEKMS:
		in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
		in.BucketKeyEnabled = aws.Bool(true)
		if s.kmsKeyID != "" {
			in.SSEKMSKeyId = aws.String(s.kmsKeyID)
		}
	}
	var maybeStored bool
	_, err := s.Client().PutObject(s.sized(ctx, int64(len(body))), in, noteMaybeStored(&maybeStored))
	if err == nil {
		return ref, nil
	}
	e := requestError(ctx, "Put", ref.Bucket, key, err)
	if !maybeStored || ctx.Err() != nil || e.Kind == storage.ErrPermanent {
		// Every attempt was refused or never left: nothing stored. Or
		// the caller gave up, and with it the means to ask. Or the last
		// attempt was refused for good (501): reading back would only
		// be refused too.
		return metadata.ObjectRef{}, e
	}
	// Some attempt may have stored the object without its answer
	// arriving whole: no answer, a 5xx, a success cut short, a timeout.
	// Whatever it looked like, the key is read back: our exact bytes
	// mean success (a retry then finds the key taken by itself), another
	// object ErrAlreadyExists, and no way to tell ErrUnavailable.
	stored, readErr := s.readBack(ctx, ref.Bucket, *in.Key, body)
	switch stored {
	case storeutil.StoredOurs:
		return ref, nil
	case storeutil.StoredOther:
		e.Kind = storage.ErrAlreadyExists
		e.Err = fmt.Errorf("the key holds another object (read back after: %w)", e.Err)
	default:
		e.Kind = storage.ErrUnavailable
		e.Err = fmt.Errorf("the object may or may not be stored; reading it back did not tell (%v): %w", readErr, e.Err)
	}
	return metadata.ObjectRef{}, e
}

// noteMaybeStored makes an operation set *maybe when one of its HTTP
// attempts may have had an effect: any attempt that reached a server and
// did not come back refused (a 4xx other than timeout, conflict or
// throttling).
func noteMaybeStored(maybe *bool) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("activetierNoteMaybeStored",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleFinalize(ctx, in)
					if err != nil && !storeutil.NeverSent(err) && !refused(err) {
						*maybe = true
					}
					return out, md, err
				}), middleware.After)
		})
	}
}

// readBack reads the object at wireKey and compares it with body without
// buffering it. It reads within each attempt of the bucket's retryer, so a
// transient failure of the read-back is retried like any request. With
// StoredUnknown comes the reason it could not tell, for the caller's error.
func (s *Store) readBack(ctx context.Context, bucketName, wireKey string, body []byte) (storeutil.Stored, error) {
	if err := ctx.Err(); err != nil {
		return storeutil.StoredUnknown, err
	}
	found := storeutil.StoredUnknown
	// With the checksum mode on, S3 sends the stored object's checksum and
	// the SDK checks the bytes against it: an answer that ends cleanly is
	// then the whole object, and a shorter one than body is another.
	_, err := s.buckets[bucketName].client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucketName), Key: aws.String(wireKey),
		ChecksumMode: types.ChecksumModeEnabled},
		withBody(func(out *s3.GetObjectOutput) error {
			var err error
			found, err = compareBody(out, body)
			return err
		}))
	if err != nil {
		return storeutil.StoredUnknown, err
	}
	return found, nil
}

// compareBody compares a GET answer's body with body, by the bytes alone:
// a Content-Length header that disagrees proves nothing, since a proxy or
// a server can send a wrong one (a fault the tests inject, which once made
// a Put take its own object for another). A differing byte, or more bytes
// than body, is another object. Fewer bytes, all matching, are another
// object too if the SDK checked them against the object's full checksum
// (the stored object is shorter: an empty one, say); without one they
// cannot be told from an answer cut short: it is an incompleteAnswer, for
// the retryer, and in the end StoredUnknown.
func compareBody(out *s3.GetObjectOutput, body []byte) (storeutil.Stored, error) {
	var chunk [32 << 10]byte
	rest := body
	for {
		n, err := out.Body.Read(chunk[:])
		if n > len(rest) || !bytes.Equal(chunk[:n], rest[:n]) {
			return storeutil.StoredOther, nil
		}
		rest = rest[n:]
		switch {
		case errors.Is(err, io.EOF) && len(rest) == 0:
			return storeutil.StoredOurs, nil
		case errors.Is(err, io.EOF) && checkedWhole(out):
			return storeutil.StoredOther, nil
		case errors.Is(err, io.EOF):
			return storeutil.StoredUnknown, incompleteAnswer{io.ErrUnexpectedEOF}
		case err != nil:
			return storeutil.StoredUnknown, incompleteAnswer{err}
		}
	}
}

// checkedWhole reports whether the SDK checked a GET answer's bytes
// against the object's full checksum: it then fails a body cut short at
// its end, so one that ends cleanly is the whole object. A composite
// checksum (of a multipart upload's parts, "…-N") is not checked.
func checkedWhole(out *s3.GetObjectOutput) bool {
	if out.ChecksumType == types.ChecksumTypeComposite {
		return false
	}
	for _, c := range []*string{out.ChecksumCRC32, out.ChecksumCRC32C, out.ChecksumCRC64NVME, out.ChecksumSHA1, out.ChecksumSHA256} {
		if c != nil && *c != "" && !strings.Contains(*c, "-") {
			return true
		}
	}
	return false
}

// GetRange reads bytes [offset, offset+length) of the object ref names
// with one ranged GET. It checks the range's arguments and that the store
// knows ref's bucket before making any request. A range that is not wholly
// inside the object is storage.ErrInvalidRange: S3 answers a range that
// starts inside the object but ends past it with the shorter range, which
// GetRange refuses rather than return fewer bytes.
func (s *Store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	return s.get(ctx, "GetRange", ref, offset, length, nil)
}

// ReadRange is GetRange into dst, as storage.RangeReader says: it reads
// the body with io.ReadFull straight into dst instead of into a new slice.
// Each attempt reads within the SDK's call, so once ReadRange returns no
// attempt writes to dst; a failed attempt may have written part of it,
// which the next overwrites. It returns len(dst), or 0 with an error.
func (s *Store) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	if _, err := s.get(ctx, "ReadRange", ref, offset, int64(len(dst)), dst); err != nil {
		return 0, err
	}
	return len(dst), nil
}

// get is GetRange and ReadRange: it reads into dst if it is not nil (then
// of length bytes), and otherwise into a slice allocated once the answer's
// headers show it holds the range.
func (s *Store) get(ctx context.Context, op string, ref metadata.ObjectRef, offset, length int64, dst []byte) ([]byte, error) {
	if length <= 0 || offset < 0 || offset > maxInt64-length {
		return nil, &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrInvalidRange,
			Err: fmt.Errorf("offset %d, length %d: want offset >= 0, length > 0 and no overflow", offset, length)}
	}
	if err := s.checkRef(op, ref); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Err: err}
	}
	last := offset + length - 1
	var buf []byte
	_, err := s.buckets[ref.Bucket].client.GetObject(s.sized(ctx, length), &s3.GetObjectInput{
		Bucket: aws.String(ref.Bucket),
		Key:    aws.String(s.prefix + ref.Key),
		Range:  aws.String("bytes=" + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(last, 10)),
	}, withBody(func(out *s3.GetObjectOutput) (err error) {
		buf, err = readRange(out, offset, length, dst)
		return err
	}))
	if err != nil {
		return nil, requestError(ctx, op, ref.Bucket, ref.Key, err)
	}
	return buf, nil
}

const maxInt64 = 1<<63 - 1

// withBody is an API option of GetObject that hands the answer to consume
// within each attempt, and closes its body after: so that a body cut short
// or disagreeing with its headers (consume returns an incompleteAnswer) is
// an attempt failure the bucket's retryer retries, with its backoff and
// quota, rather than a failure after the SDK is done.
func withBody(consume func(*s3.GetObjectOutput) error) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("activetierConsumeBody",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					if err != nil {
						return out, md, err
					}
					get, ok := out.Result.(*s3.GetObjectOutput)
					if !ok {
						return out, md, fmt.Errorf("s3express: GetObject returned %T", out.Result)
					}
					defer get.Body.Close()
					return out, md, consume(get)
				}), middleware.Before)
		})
	}
}

// readRange reads exactly length bytes at offset from a ranged GET's
// answer, after checking its headers, into dst, or into a new slice if
// dst is nil.
func readRange(out *s3.GetObjectOutput, offset, length int64, dst []byte) ([]byte, error) {
	if err := checkRange(out, offset, length); err != nil {
		if err.kind == storage.ErrUnavailable {
			return nil, incompleteAnswer{err}
		}
		return nil, err
	}
	if dst == nil {
		dst = make([]byte, length)
	}
	if n, err := io.ReadFull(out.Body, dst); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, incompleteAnswer{fmt.Errorf("response body ended after %d of %d bytes: %w", n, length, err)}
	}
	return dst, nil
}

// checkRange checks that a GET response holds exactly the requested range.
// An answer that disagrees with the request is ErrUnavailable: a server or
// something between that misbehaved this once, like a body cut short; only
// an object too short for the range is ErrInvalidRange.
func checkRange(out *s3.GetObjectOutput, offset, length int64) *rangeError {
	contentLength := aws.ToInt64(out.ContentLength)
	cr := aws.ToString(out.ContentRange)
	if cr == "" {
		// The server sent the whole object (200): acceptable only if the
		// whole object is the range.
		switch {
		case out.ContentLength != nil && contentLength < offset+length:
			return &rangeError{kind: storage.ErrInvalidRange, err: fmt.Errorf("object is %d bytes, range ends at %d", contentLength, offset+length)}
		case offset == 0 && contentLength == length:
			return nil
		}
		return &rangeError{kind: storage.ErrUnavailable, err: fmt.Errorf("server ignored the Range header (no Content-Range, Content-Length %d)", contentLength)}
	}
	start, end, size, err := storeutil.ParseContentRange(cr)
	if err != nil {
		return &rangeError{kind: storage.ErrUnavailable, err: err}
	}
	switch {
	case start != offset:
		return &rangeError{kind: storage.ErrUnavailable, err: fmt.Errorf("server returned range %q for a range starting at %d", cr, offset)}
	case end < offset+length-1:
		return &rangeError{kind: storage.ErrInvalidRange, err: fmt.Errorf("object is %d bytes, range ends at %d", size, offset+length)}
	case end != offset+length-1 || out.ContentLength != nil && contentLength != length:
		return &rangeError{kind: storage.ErrUnavailable, err: fmt.Errorf("server returned range %q with Content-Length %d for %d bytes at %d", cr, contentLength, length, offset)}
	}
	return nil
}

// rangeError is a GET answer that does not hold the requested range, and
// the walstore sentinel it means.
type rangeError struct {
	kind error
	err  error
}

func (e *rangeError) Error() string { return e.err.Error() }
func (e *rangeError) Unwrap() error { return e.err }

// Delete removes the objects refs name, grouped per bucket into
// DeleteObjects requests of up to 1000 keys. Every ref's bucket is checked
// before any request. A key S3 could not take (ErrInvalidKey) is reported
// and the other keys are still deleted, so that one bad name, listed from
// a bucket another writer shares, never blocks garbage collection.
// Missing objects are not errors. A request that fails as unavailable
// stops the deletes of its bucket, not of the others; one refused goes on
// with the bucket's next batch. Keys S3 could not delete are reported, at
// most ten of them by name (the rest counted).
func (s *Store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	const op = "Delete"
	perBucket := map[string][]string{}
	seen := map[metadata.ObjectRef]bool{}
	var errs []error
	for _, ref := range refs {
		if err := s.checkRef(op, ref); err != nil {
			return err
		}
	}
	for _, ref := range refs {
		if err := s.checkKey(op, ref.Bucket, ref.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		k := metadata.ObjectRef{Bucket: ref.Bucket, Key: ref.Key}
		if !seen[k] {
			seen[k] = true
			perBucket[ref.Bucket] = append(perBucket[ref.Bucket], s.prefix+ref.Key)
		}
	}
	if len(perBucket) == 0 {
		return errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Bucket: refs[0].Bucket, Key: refs[0].Key, Err: err}
	}
	for _, b := range slices.Sorted(maps.Keys(perBucket)) {
		keys := perBucket[b]
		for batch := range slices.Chunk(keys, maxDeleteObjects) {
			failed, err := s.deleteBatch(ctx, b, batch)
			errs = append(errs, failed...)
			if err != nil {
				errs = append(errs, err)
				if !errors.Is(err, storage.ErrPermanent) {
					// Unavailable, or the caller gave up: the
					// bucket's later batches would fare no better.
					break
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// maxReportedKeys bounds how many per-key DeleteObjects failures are
// reported by name.
const maxReportedKeys = 10

// deleteBatch sends one DeleteObjects request. err is the request's
// failure; failed are the keys S3 reported it could not delete.
func (s *Store) deleteBatch(ctx context.Context, bucketName string, keys []string) (failed []error, err error) {
	ids := make([]types.ObjectIdentifier, len(keys))
	for i := range keys {
		ids[i] = types.ObjectIdentifier{Key: &keys[i]}
	}
	out, err := s.buckets[bucketName].client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket:            aws.String(bucketName),
		Delete:            &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		ChecksumAlgorithm: s.checksum,
	})
	if err != nil {
		return nil, requestError(ctx, "Delete", bucketName, strings.TrimPrefix(keys[0], s.prefix),
			fmt.Errorf("DeleteObjects of %d keys from this one on: %w", len(keys), err))
	}
	requestID, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	var unreported int
	for _, e := range out.Errors {
		code := aws.ToString(e.Code)
		if code == "NoSuchKey" {
			continue
		}
		if len(failed) == maxReportedKeys {
			unreported++
			continue
		}
		failed = append(failed, &Error{
			Op: "Delete", Bucket: bucketName, Key: strings.TrimPrefix(aws.ToString(e.Key), s.prefix),
			Code: code, RequestID: requestID, Kind: classifyCode(code),
			Err: fmt.Errorf("%s: %s", code, aws.ToString(e.Message)),
		})
	}
	if unreported > 0 {
		failed = append(failed, fmt.Errorf("s3express: Delete %s: %d more keys could not be deleted", bucketName, unreported))
	}
	return failed, nil
}

// List returns the objects of bucket whose keys (without
// Options.KeyPrefix) start with prefix, in no particular order: S3 Express
// directory buckets do not sort their listings. It follows continuation
// tokens to the end. For a directory bucket, a prefix that does not end in
// "/" is listed from its last "/" and filtered here, since S3 Express lists
// only "/"-terminated prefixes.
func (s *Store) List(ctx context.Context, bucketName, prefix string) ([]storage.ObjectInfo, error) {
	const op = "List"
	b, ok := s.buckets[bucketName]
	if !ok {
		return nil, s.unknownBucket(op, bucketName, prefix)
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: op, Bucket: bucketName, Key: prefix, Err: err}
	}
	full := s.prefix + prefix
	listPrefix := full
	if b.kind == directoryBucket && !strings.HasSuffix(full, "/") {
		listPrefix = full[:strings.LastIndex(full, "/")+1]
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucketName)}
	if listPrefix != "" {
		in.Prefix = aws.String(listPrefix)
	}
	var infos []storage.ObjectInfo
	pages := s3.NewListObjectsV2Paginator(b.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, requestError(ctx, op, bucketName, prefix, err)
		}
		for _, obj := range page.Contents {
			key := aws.ToString(obj.Key)
			if !strings.HasPrefix(key, full) {
				continue
			}
			infos = append(infos, storage.ObjectInfo{
				Ref:          metadata.ObjectRef{AZ: b.az, Bucket: bucketName, Key: key[len(s.prefix):]},
				Size:         aws.ToInt64(obj.Size),
				LastModified: aws.ToTime(obj.LastModified),
			})
		}
	}
	return infos, nil
}

// checkRef refuses references to buckets the store was not configured
// with, or to a configured bucket under another AZ's name.
func (s *Store) checkRef(op string, ref metadata.ObjectRef) error {
	b, ok := s.buckets[ref.Bucket]
	if !ok {
		return s.unknownBucket(op, ref.Bucket, ref.Key)
	}
	if ref.AZ != "" && ref.AZ != b.az {
		return &Error{Op: op, Bucket: ref.Bucket, Key: ref.Key, Kind: storage.ErrUnknownBucket,
			Err: fmt.Errorf("the reference names AZ %q, but the bucket is configured for AZ %q", ref.AZ, b.az)}
	}
	return nil
}

func (s *Store) unknownBucket(op, bucketName, key string) error {
	return &Error{Op: op, Bucket: bucketName, Key: key, Kind: storage.ErrUnknownBucket,
		Err: fmt.Errorf("configured buckets are %s", strings.Join(slices.Sorted(maps.Keys(s.buckets)), ", "))}
}

// checkKey refuses keys S3 would reject, before any request.
func (s *Store) checkKey(op, bucketName, key string) error {
	var why string
	switch {
	case key == "":
		why = "empty key"
	case !utf8.ValidString(key):
		why = "key is not valid UTF-8"
	case len(s.prefix)+len(key) > maxKeyBytes:
		why = fmt.Sprintf("key is %d bytes with the key prefix; S3 allows %d", len(s.prefix)+len(key), maxKeyBytes)
	case hasControl(key):
		r, _ := storeutil.ControlChar(key)
		why = fmt.Sprintf("key has control character %U", r)
	case s.buckets[bucketName].kind == directoryBucket && strings.TrimSpace(s.prefix+key) == "":
		why = "directory buckets refuse keys made only of whitespace"
	default:
		return nil
	}
	return &Error{Op: op, Bucket: bucketName, Key: key, Kind: ErrInvalidKey, Err: errors.New(why)}
}

func hasControl(key string) bool {
	_, ok := storeutil.ControlChar(key)
	return ok
}
