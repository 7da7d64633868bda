package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	gcs "cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/gcsstore"
	"github.com/activetier/activetier/storage"
)

const (
	// gcsEndpointEnv names the Cloud Storage emulator --store gcs=PREFIX
	// runs on when it is set: the variable scripts/test.sh sets for
	// fake-gcs-server.
	gcsEndpointEnv = "ACTIVETIER_GCS_ENDPOINT"
	// gcsProjectEnv names the project --store gcs creates missing buckets
	// in: the variable Google's client libraries and tools read for the
	// default project.
	gcsProjectEnv = "GOOGLE_CLOUD_PROJECT"
	// gcsEmulatorProject is the project buckets are created in on an
	// emulator when gcsProjectEnv is not set: emulators accept any.
	gcsEmulatorProject = "activetier-demo"
	// gcsDefaultEndpoint is where the client library sends requests when
	// no emulator is named, for the progress header and the report.
	gcsDefaultEndpoint = "https://storage.googleapis.com"
)

// gcsObjects keeps the sim's buckets on Cloud Storage, or an emulator:
// bucket PREFIX-AZ for each AZ, created when missing, with every object
// under a key prefix unique to the run. Every broker gets a
// gcsstore.Store of its own, as a broker process would, with its AZ as
// the local zone and every AZ's bucket configured, wrapped to count its
// calls and to refuse those to a failed AZ's bucket.
type gcsObjects struct {
	// endpoint is the emulator's URL, or "" for Cloud Storage itself.
	endpoint string
	opts     gcsstore.Options // LocalAZ is set per store
	// admin checks and creates the buckets and removes what the run
	// left: its calls are not the run's, so they are neither counted nor
	// refused by the outage.
	admin *gcsstore.Store
	*storeCalls

	mu     sync.Mutex
	stores []*gcsstore.Store // the brokers', for close
}

var _ storeBackend = (*gcsObjects)(nil)

// openGCSObjects checks each AZ's bucket PREFIX-AZ with one request,
// creating the missing ones in project (on an emulator, in any project if
// project is empty), so that a wrong endpoint, bucket or credential fails
// here in one line instead of stalling the engines. endpoint is an
// emulator's URL, or "" for Cloud Storage with the standard Google
// credentials.
func openGCSObjects(ctx context.Context, prefix, endpoint, project string, azs []string) (*gcsObjects, error) {
	keyPrefix, err := runPrefix(time.Now())
	if err != nil {
		return nil, err
	}
	buckets := make(map[string]string, len(azs))
	for _, az := range azs {
		buckets[az] = prefix + "-" + az
	}
	g := &gcsObjects{
		endpoint:   endpoint,
		opts:       gcsstore.Options{Buckets: buckets, KeyPrefix: keyPrefix, Endpoint: endpoint},
		storeCalls: newStoreCalls(azs, buckets, true),
	}
	opts := g.opts
	opts.LocalAZ = azs[0]
	if g.admin, err = gcsstore.New(ctx, opts); err != nil {
		return nil, fmt.Errorf("--store gcs=%s: %w", prefix, err)
	}
	if err := g.checkBuckets(ctx, project); err != nil {
		return nil, errors.Join(fmt.Errorf("--store gcs=%s: %w", prefix, err), g.close())
	}
	return g, nil
}

// where is the endpoint the requests go to.
func (g *gcsObjects) where() string {
	if g.endpoint == "" {
		return gcsDefaultEndpoint
	}
	return g.endpoint
}

// checkBuckets reads each bucket's metadata, creating the bucket if it
// does not exist. The store's client makes one attempt per request.
func (g *gcsObjects) checkBuckets(ctx context.Context, project string) error {
	for _, az := range g.azs {
		bucket := g.buckets[az]
		err := g.bucketAttrs(ctx, bucket)
		switch {
		case err == nil:
		case errors.Is(err, gcs.ErrBucketNotExist):
			if err := g.createBucket(ctx, bucket, project); err != nil {
				return fmt.Errorf("creating bucket %s for AZ %s at %s: %w", bucket, az, g.where(), err)
			}
		default:
			return fmt.Errorf("checking bucket %s (AZ %s) at %s: %w", bucket, az, g.where(), err)
		}
	}
	return nil
}

func (g *gcsObjects) bucketAttrs(ctx context.Context, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := g.admin.Client().Bucket(bucket).Attrs(ctx)
	return err
}

// createBucket creates bucket with Cloud Storage's defaults (a
// multi-region Standard bucket on Cloud Storage itself). A bucket that
// appeared meanwhile (409) is fine if it is readable: then it is ours or
// shared with us; a name taken by someone else fails the check again.
func (g *gcsObjects) createBucket(ctx context.Context, bucket, project string) error {
	if project == "" {
		if g.endpoint == "" {
			return fmt.Errorf("it does not exist: create it, or set %s to the project the demo should create it in", gcsProjectEnv)
		}
		project = gcsEmulatorProject
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := g.admin.Client().Bucket(bucket).Create(cctx, project, nil)
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict {
		return g.bucketAttrs(ctx, bucket)
	}
	return err
}

func (g *gcsObjects) store(az string) (storage.ObjectStore, error) {
	opts := g.opts
	opts.LocalAZ = az
	// The context only serves creating the client (finding credentials);
	// the store's requests take their callers' contexts.
	st, err := gcsstore.New(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.stores = append(g.stores, st)
	g.mu.Unlock()
	return newCountingStore(st, g.storeCalls), nil
}

func (g *gcsObjects) describe() string {
	pairs := make([]string, len(g.azs))
	for i, az := range g.azs {
		pairs[i] = az + "=" + g.buckets[az]
	}
	return fmt.Sprintf("Cloud Storage buckets %s at %s under %s", strings.Join(pairs, ","), g.where(), g.opts.KeyPrefix)
}

// prices are regional Standard's: the buckets the demo creates are
// Standard buckets reached over the JSON and XML APIs, not zonal (Rapid)
// buckets, which need a placement and the gRPC client.
func (g *gcsObjects) prices() costmodel.Prices { return costmodel.GCSStandard2026() }

// cleanup counts the objects the run left under its key prefix in every
// AZ's bucket, the failed AZ's included, and deletes them unless keep.
// The buckets stay, created by the run or not.
func (g *gcsObjects) cleanup(ctx context.Context, keep bool) (int, error) {
	return removeLeft(ctx, g.admin, g.azs, g.buckets, g.opts.KeyPrefix, keep)
}

func (g *gcsObjects) report() *storeReport {
	return &storeReport{Kind: "gcs", Location: g.where() + " under " + g.opts.KeyPrefix, Buckets: maps.Clone(g.buckets)}
}

// close closes every store's client and connections, the admin's last.
func (g *gcsObjects) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, st := range g.stores {
		errs = append(errs, st.Close())
	}
	g.stores = nil
	errs = append(errs, g.admin.Close())
	return errors.Join(errs...)
}
