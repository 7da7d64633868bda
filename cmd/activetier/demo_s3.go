package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// s3DemoOptions are the demo's flags for running against an S3 endpoint.
type s3DemoOptions struct {
	endpoint   string
	buckets    bucketsFlag
	compatible bool
	region     string
	create     bool
	keep       bool
}

func (o *s3DemoOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.endpoint, "s3-endpoint", "", "keep the buckets on the S3-compatible server at this `URL` (versitygw, MinIO, ...) instead of in memory")
	fs.Var(&o.buckets, "buckets", "with --s3-endpoint: each AZ's bucket, as `AZ=BUCKET,...`, which also names the AZs (default az1=activetier-demo-az1,... for --azs AZs)")
	fs.BoolVar(&o.compatible, "s3-compatible", true, "with --s3-endpoint: path-style addressing and, for directory bucket names, no S3 Express session auth; false only for AWS itself")
	fs.StringVar(&o.region, "region", "", "with --s3-endpoint: the region requests are signed for (default: from the AWS environment, else us-east-1)")
	fs.BoolVar(&o.create, "create-buckets", false, "with --s3-endpoint: create the buckets that do not exist")
	fs.BoolVar(&o.keep, "keep-objects", false, "with --s3-endpoint or --store: leave the objects garbage collection did not delete, instead of deleting them at the end")
}

// validate checks the S3 flags against each other and returns the AZ
// names when --buckets gives them (nil otherwise). Bucket names are checked
// by s3express itself, which makes no request to do so.
func (o *s3DemoOptions) validate(fs *flag.FlagSet) ([]string, error) {
	if o.endpoint == "" && isSet(fs, "s3-endpoint") {
		// Most likely a shell variable that is not set: running in memory
		// instead would hide that.
		return nil, flagError(fs, "s3-endpoint", "is empty")
	}
	if o.endpoint == "" {
		// --keep-objects also serves --store, which validateStore checks.
		for _, name := range []string{"buckets", "s3-compatible", "region", "create-buckets"} {
			if isSet(fs, name) {
				return nil, flagError(fs, name, "needs --s3-endpoint")
			}
		}
		return nil, nil
	}
	if err := checkEndpoint(fs, o.endpoint); err != nil {
		return nil, err
	}
	if len(o.buckets.azs) == 0 {
		return nil, nil
	}
	_, err := s3express.New(aws.Config{}, s3express.Options{Buckets: o.buckets.byAZ, LocalAZ: o.buckets.azs[0], S3Compatible: o.compatible})
	if err != nil {
		return nil, flagError(fs, "buckets", strings.TrimPrefix(err.Error(), "s3express: "))
	}
	return o.buckets.azs, nil
}

// checkEndpoint checks that --s3-endpoint is an http or https URL, which
// the SDK would otherwise reject only when making the first request.
func checkEndpoint(fs *flag.FlagSet, endpoint string) error {
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return flagError(fs, "s3-endpoint", "want a URL such as http://127.0.0.1:7070 or https://s3.example.com")
	}
	return nil
}

// bucketsFlag is --buckets: AZ=BUCKET pairs, separated by commas or given
// in several flags. Their order is the order brokers are spread over the
// AZs in.
type bucketsFlag struct {
	azs  []string
	byAZ map[string]string
}

func (b *bucketsFlag) String() string {
	pairs := make([]string, len(b.azs))
	for i, az := range b.azs {
		pairs[i] = az + "=" + b.byAZ[az]
	}
	return strings.Join(pairs, ",")
}

func (b *bucketsFlag) Set(s string) error {
	if b.byAZ == nil {
		b.byAZ = make(map[string]string)
	}
	for pair := range strings.SplitSeq(s, ",") {
		az, bucket, ok := strings.Cut(strings.TrimSpace(pair), "=")
		az, bucket = strings.TrimSpace(az), strings.TrimSpace(bucket)
		if !ok || az == "" || bucket == "" {
			return fmt.Errorf("%q is not AZ=BUCKET (want pairs such as az1=demo-a,az2=demo-b)", pair)
		}
		if _, dup := b.byAZ[az]; dup {
			return fmt.Errorf("AZ %q is given twice", az)
		}
		for _, other := range b.azs {
			if b.byAZ[other] == bucket {
				return fmt.Errorf("bucket %q is given for AZs %q and %q; each AZ needs its own", bucket, other, az)
			}
		}
		b.azs = append(b.azs, az)
		b.byAZ[az] = bucket
	}
	return nil
}

// Bounds on the requests the demo makes outside the engines.
const (
	// checkTimeout bounds the one request per bucket that checks the
	// endpoint before the cluster starts (and the one creating it).
	checkTimeout = 10 * time.Second
	// cleanupTimeout bounds deleting what the run left, which also runs
	// after an interrupt.
	cleanupTimeout = 30 * time.Second
)

// s3Objects keeps the sim's buckets on an S3 endpoint. Every broker gets
// an s3express.Store of its own, as a broker process would, with its AZ as
// the local one and every AZ's bucket configured. Their HTTP clients count
// each request the SDK sends, retries included, as S3 bills them, and
// refuse requests to a failed AZ's bucket (see setOutage). All objects are
// written under a key prefix unique to the run.
type s3Objects struct {
	endpoint string
	azs      []string
	opts     s3express.Options // LocalAZ is set per store
	cfg      aws.Config
	// admin checks, creates and empties the buckets: its requests are
	// not the run's, so it neither counts them nor sees the outage.
	admin    *s3express.Store
	azOf     map[string]string // by bucket
	counters requestCounters

	// outage holds the buckets of the AZ the demo took down.
	outage *faults.Outage

	mu     sync.Mutex
	stores []*s3express.Store
}

var _ objectBackend = (*s3Objects)(nil)

// openS3Objects loads the AWS configuration the standard way (credentials
// and region from the environment, shared files or an instance role) for
// the endpoint, and checks every bucket with one HEAD request, creating the
// missing ones if asked, so that a wrong endpoint or bucket fails here in
// one line instead of stalling the engines.
func openS3Objects(ctx context.Context, o *s3DemoOptions, azs []string) (*s3Objects, error) {
	var loadOpts []func(*config.LoadOptions) error
	if o.region != "" {
		loadOpts = append(loadOpts, config.WithRegion(o.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cfg.BaseEndpoint = aws.String(o.endpoint)

	buckets := o.buckets.byAZ
	if len(o.buckets.azs) == 0 {
		buckets = make(map[string]string, len(azs))
		for _, az := range azs {
			buckets[az] = bucketName(az)
		}
	}
	prefix, err := runPrefix(time.Now())
	if err != nil {
		return nil, err
	}
	s := &s3Objects{
		endpoint: o.endpoint, azs: azs, cfg: cfg,
		opts:   s3express.Options{Buckets: buckets, KeyPrefix: prefix, S3Compatible: o.compatible},
		azOf:   make(map[string]string, len(buckets)),
		outage: faults.NewOutage(storage.ErrUnavailable),
	}
	for az, b := range buckets {
		s.azOf[b] = az
	}
	opts := s.opts
	opts.LocalAZ = azs[0]
	if s.admin, err = s3express.New(cfg, opts); err != nil {
		return nil, err
	}
	if err := s.checkBuckets(ctx, o.create); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// runPrefix is the key prefix of one run's objects: the time it started and
// a random tag, so that runs sharing buckets never see each other's objects.
func runPrefix(now time.Time) (string, error) {
	var tag [4]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return "", err
	}
	return "activetier-demo/" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(tag[:]) + "/", nil
}

func (s *s3Objects) checkBuckets(ctx context.Context, create bool) error {
	for _, az := range s.azs {
		bucket := s.opts.Buckets[az]
		err := s.headBucket(ctx, bucket)
		var sendErr *smithyhttp.RequestSendError
		var respErr *awshttp.ResponseError
		status := 0
		if errors.As(err, &respErr) {
			status = respErr.HTTPStatusCode()
		}
		switch {
		case err == nil:
		case errors.As(err, &sendErr):
			return fmt.Errorf("cannot reach the S3 endpoint %s: %w", s.endpoint, sendErr)
		case status == http.StatusNotFound && create:
			if err := s.createBucket(ctx, bucket); err != nil {
				return fmt.Errorf("creating bucket %s for AZ %s at %s: %w", bucket, az, s.endpoint, err)
			}
		case status == http.StatusNotFound:
			return fmt.Errorf("bucket %s (AZ %s) does not exist at %s: create it, or pass --create-buckets", bucket, az, s.endpoint)
		case status == http.StatusForbidden:
			return fmt.Errorf("access to bucket %s (AZ %s) at %s denied (HTTP 403): check the AWS credentials in the environment", bucket, az, s.endpoint)
		default:
			return fmt.Errorf("checking bucket %s (AZ %s) at %s: %w", bucket, az, s.endpoint, err)
		}
	}
	return nil
}

// oneAttempt makes a check a single request: an endpoint that refuses it
// should fail the demo at once, not after the SDK's retries.
func oneAttempt(o *s3.Options) { o.RetryMaxAttempts = 1 }

func (s *s3Objects) headBucket(ctx context.Context, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := s.admin.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}, oneAttempt)
	return err
}

// createBucket creates a bucket as S3 wants it: outside us-east-1 with the
// region as its location. Losing a race to create it is not an error.
func (s *s3Objects) createBucket(ctx context.Context, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if s.cfg.Region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(s.cfg.Region)}
	}
	_, err := s.admin.Client().CreateBucket(ctx, in)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "BucketAlreadyOwnedByYou" {
		return nil
	}
	return err
}

func (s *s3Objects) store(az string) (storage.ObjectStore, error) {
	opts := s.opts
	opts.LocalAZ = az
	// The store's own tuned client is in place when ClientOptions run.
	opts.ClientOptions = []func(*s3.Options){func(o *s3.Options) {
		o.HTTPClient = &accountingClient{next: o.HTTPClient, s: s}
	}}
	st, err := s3express.New(s.cfg, opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stores = append(s.stores, st)
	s.mu.Unlock()
	return st, nil
}

// setOutage refuses, from now on, every request of every broker's store
// to az's bucket, as if its endpoint had gone away. One endpoint cannot
// lose an AZ, so the outage is simulated in the stores' HTTP clients: the
// request is not sent, and the SDK gets a dial error, which it retries and
// s3express then reports as storage.ErrUnavailable, as for a real
// unreachable endpoint. Requests already sent complete.
func (s *s3Objects) setOutage(az string) error {
	bucket, ok := s.opts.Buckets[az]
	if !ok {
		return fmt.Errorf("no AZ %q (want one of %s)", az, strings.Join(s.azs, ", "))
	}
	s.outage.SetDown(bucket, true)
	return nil
}

func (s *s3Objects) requests() requestCounts { return s.counters.load() }

// bucketOf finds the bucket a request addresses: the first label of the
// host (virtual-hosted style, as on AWS) or the first segment of the path
// (path style), whichever is one of the deployment's buckets.
func (s *s3Objects) bucketOf(u *url.URL) string {
	if label, _, _ := strings.Cut(u.Hostname(), "."); s.azOf[label] != "" {
		return label
	}
	if seg, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/"); s.azOf[seg] != "" {
		return seg
	}
	return ""
}

// cleanup lists what the run left under its key prefix in every bucket, the
// failed AZ's included, and deletes it unless keep. Garbage collection has
// deleted every object all followers applied; what remains is the last
// objects of the run, and those of a failed AZ.
func (s *s3Objects) cleanup(ctx context.Context, keep bool) (left int, err error) {
	return removeLeft(ctx, s.admin, s.azs, s.opts.Buckets, s.opts.KeyPrefix, keep)
}

// close closes every store's idle connections.
func (s *s3Objects) close() {
	s.admin.CloseIdleConnections()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stores {
		st.CloseIdleConnections()
	}
}

// requestCounters are requestCounts being counted.
type requestCounters struct {
	puts, gets, deletes, lists, failed, bytesUp, bytesDown atomic.Int64
	givenUp, putsStored, putsFailed, putsGivenUp           atomic.Int64
}

func (c *requestCounters) load() requestCounts {
	return requestCounts{
		puts: c.puts.Load(), gets: c.gets.Load(), deletes: c.deletes.Load(), lists: c.lists.Load(),
		failed: c.failed.Load(), bytesUp: c.bytesUp.Load(), bytesDown: c.bytesDown.Load(),
		outcomes: true, givenUp: c.givenUp.Load(),
		putsStored: c.putsStored.Load(), putsFailed: c.putsFailed.Load(), putsGivenUp: c.putsGivenUp.Load(),
	}
}

// ended counts how a request, a PUT if put, ended: once ctx, its
// caller's, is done, the caller gave up (a cancelled hedge, the engine's
// own timeout), however the store reported it, a success included, which
// the caller never learnt of and may retry; else err nil is success and
// any other error the store's failure.
func (c *requestCounters) ended(ctx context.Context, put bool, err error) {
	switch {
	case err == nil && ctx.Err() == nil:
		if put {
			c.putsStored.Add(1)
		}
	case ctx.Err() != nil:
		c.givenUp.Add(1)
		if put {
			c.putsGivenUp.Add(1)
		}
	default:
		c.failed.Add(1)
		if put {
			c.putsFailed.Add(1)
		}
	}
}

// accountingClient is a broker store's HTTP client, around the one
// s3express tuned. Below the SDK's retryer, it sees every attempt: it
// counts each by its operation (the names S3 bills by) and by how it ended
// (see requestCounters.ended), and refuses those to a bucket whose AZ is
// down.
type accountingClient struct {
	next aws.HTTPClient
	s    *s3Objects
}

func (c *accountingClient) Do(r *http.Request) (*http.Response, error) {
	counts := &c.s.counters
	put, get := false, false
	switch awsmiddleware.GetOperationName(r.Context()) {
	case "PutObject":
		counts.puts.Add(1)
		counts.bytesUp.Add(bodyBytes(r))
		put = true
	case "GetObject", "HeadObject":
		counts.gets.Add(1)
		get = true
	case "DeleteObjects", "DeleteObject":
		counts.deletes.Add(1)
	case "ListObjectsV2":
		counts.lists.Add(1)
	default:
		// Nothing else is a request of the run's workload.
		return c.next.Do(r)
	}
	if bucket := c.s.bucketOf(r.URL); bucket != "" && c.s.outage.Down(bucket) {
		err := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("AZ %s is down (simulated outage): bucket %s refused", c.s.azOf[bucket], bucket)}
		counts.ended(context.Background(), put, err) // refused whether or not its caller still waits
		return nil, err
	}
	resp, err := c.next.Do(r)
	switch {
	case err != nil:
		counts.ended(r.Context(), put, err)
	case resp.StatusCode >= 300:
		counts.ended(context.Background(), put, errors.New(resp.Status)) // the store's answer
	case get:
		counts.ended(r.Context(), false, nil)
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &counts.bytesDown}
	case put:
		// The SDK closes a PUT's answer once it has read it, before it
		// returns: only then is the PUT the caller's success.
		resp.Body = &putAnswer{ReadCloser: resp.Body, ctx: r.Context(), c: counts}
	default:
		counts.ended(r.Context(), false, nil)
	}
	return resp, err
}

// putAnswer is a PUT's successful answer: closing it counts the PUT
// stored, or given up if its caller stopped waiting first (a hedge that
// won, the engine's own timeout) and so never learnt of it.
type putAnswer struct {
	io.ReadCloser
	ctx  context.Context
	c    *requestCounters
	once sync.Once
}

func (a *putAnswer) Close() error {
	err := a.ReadCloser.Close()
	a.once.Do(func() { a.c.ended(a.ctx, true, a.ctx.Err()) })
	return err
}

// bodyBytes is the size of a PUT's object: the payload before any
// aws-chunked encoding of a streamed checksum, else the body's length.
func bodyBytes(r *http.Request) int64 {
	if n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64); err == nil {
		return n
	}
	return max(r.ContentLength, 0)
}

// countingBody counts the bytes read from a response body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// describe is the progress header's account of where the objects are.
func (s *s3Objects) describe() string {
	pairs := make([]string, len(s.azs))
	for i, az := range s.azs {
		pairs[i] = az + "=" + s.opts.Buckets[az]
	}
	return fmt.Sprintf("buckets %s at %s under %s", strings.Join(pairs, ","), s.endpoint, s.opts.KeyPrefix)
}

// s3Report is what the report says of a run against an S3 endpoint.
type s3Report struct {
	Endpoint string `json:"endpoint"`
	// Buckets maps each AZ to its bucket.
	Buckets   map[string]string `json:"buckets"`
	KeyPrefix string            `json:"key_prefix"`
	// ObjectsLeft is how many objects were under KeyPrefix at the end,
	// which garbage collection had not deleted; they were then deleted,
	// or kept with --keep-objects (ObjectsKept).
	ObjectsLeft int  `json:"objects_left"`
	ObjectsKept bool `json:"objects_kept"`
	// CleanupError says why listing or deleting them failed.
	CleanupError string `json:"cleanup_error,omitempty"`
}

func (s *s3Objects) report() *s3Report {
	return &s3Report{Endpoint: s.endpoint, Buckets: s.opts.Buckets, KeyPrefix: s.opts.KeyPrefix}
}
