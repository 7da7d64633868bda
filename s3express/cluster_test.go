package s3express_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// TestScenariosOverS3 runs walstore's leader and follower engines over
// s3express stores against the test server, through all seven failure
// scenarios of docs/design.md, with a memstore metadata log. Each test of the
// cluster gets three fresh directory-style buckets standing for three AZs
// (so New parses and checks their AZ ids), each reached through its own
// zonal endpoint (see zonalEndpoint). The AZ-outage scenarios take that
// endpoint down, so every broker's requests to the dead AZ's bucket fail
// on the network and the store's own error mapping turns them into
// storage.ErrUnavailable; they run with both kinds of outage.
func TestScenariosOverS3(t *testing.T) {
	cfg := serverConfig(t)
	for _, c := range outageCases {
		t.Run(c.mode.String(), func(t *testing.T) {
			clustertest.RunScenarios(t, zonalBackend(cfg, c.mode, c.requestTimeout))
		})
	}
}

// zonalBackend is the cluster backend of these tests: zonalObjects and a
// memstore metadata log.
func zonalBackend(cfg aws.Config, mode outage, requestTimeout time.Duration) clustertest.Backend {
	return clustertest.Backend{
		Objects: func(t *testing.T) clustertest.Objects { return newZonalObjects(t, cfg, mode, requestTimeout) },
		Log: func(t *testing.T, partitions int32) metadata.Log {
			l, err := memstore.NewLog(partitions, memstore.WithMaxPollWait(20*time.Millisecond))
			require.NoError(t, err)
			return l
		},
	}
}

// TestLeaderAZOutage takes away the leader's own AZ while it produces,
// which the scenarios do not (their leader is gone first): uploads fail
// on the network, the leader reports itself degraded (the broker's cue to
// replicate the ordinary way) and loses nothing; once the AZ is back
// everything is stored, published and replicated.
func TestLeaderAZOutage(t *testing.T) {
	cfg := serverConfig(t)
	for _, c := range outageCases {
		t.Run(c.mode.String(), func(t *testing.T) {
			ctx := t.Context()
			tp := clustertest.TP
			cl := clustertest.New(t, zonalBackend(cfg, c.mode, c.requestTimeout), 4)
			r1, r2 := cl.AddBroker(1, "az1"), cl.AddBroker(2, "az2")
			cl.SetReplicas(tp, 1, 2)
			r1.StartLeader(walstore.NodeConfig{DegradedAfter: 50 * time.Millisecond})
			r1.BecomeLeader(ctx, tp, 1, -1)
			r2.StartFollower(tp)
			r1.Produce(ctx, tp, 1, 0, 99, 10)
			require.NoError(t, r1.Node.WaitDurable(ctx, tp, 1, 99))

			require.NoError(t, cl.Objects.SetOutage("az1", true))
			r1.Produce(ctx, tp, 1, 100, 199, 10)
			require.Eventually(t, func() bool { return r1.Node.Health().Degraded }, 20*time.Second, time.Millisecond,
				"the leader reports itself degraded while its bucket is unreachable")
			health := r1.Node.Health()
			t.Logf("degraded since %v: %v", health.Since.Format(time.StampMilli), health.Err)
			require.ErrorIs(t, health.Err, storage.ErrUnavailable)
			require.Less(t, r1.Node.DurableOffset(tp), int64(200), "nothing is durable while the bucket is down")

			require.NoError(t, cl.Objects.SetOutage("az1", false))
			require.NoError(t, r1.Node.WaitDurable(ctx, tp, 1, 199))
			require.Eventually(t, func() bool { return !r1.Node.Health().Degraded }, 20*time.Second, time.Millisecond,
				"healthy again once uploads succeed")
			clustertest.RequireConverges(t, r2, r1, tp)
		})
	}
}

// outageCases are the outages the tests stage. In a silent outage every
// attempt lasts the store's RequestTimeout, and a request makes three. A
// follower waits for a fetch in flight to end before it turns to a
// republished copy of the same offsets in another bucket, so with the
// default timeout (10s) a fetch from the dead AZ holds it back for more
// than 30s, longer than a scenario waits for convergence; the silent case
// uses a timeout suited to small objects in an AZ-local service.
var outageCases = []struct {
	mode           outage
	requestTimeout time.Duration
}{
	{refused, 0},
	{silent, 250 * time.Millisecond},
}

// TestZonalOutage checks the outage the scenarios rely on: while an AZ is
// down, every store of the deployment, including one holding an idle
// kept-alive connection to that AZ, gets storage.ErrUnavailable for that
// AZ's bucket and nothing else; the other AZs keep working; afterwards the
// bucket is back with its objects.
func TestZonalOutage(t *testing.T) {
	cfg := serverConfig(t)
	for _, c := range outageCases {
		t.Run(c.mode.String(), func(t *testing.T) {
			objs := newZonalObjects(t, cfg, c.mode, c.requestTimeout)
			ctx := t.Context()
			writer, err := objs.Store("az1")
			require.NoError(t, err)
			reader, err := objs.Store("az2")
			require.NoError(t, err)

			data := []byte("a combined object in az1")
			ref, err := writer.Put(ctx, "outage/object", data)
			require.NoError(t, err)
			require.Equal(t, objs.buckets[zoneID("az1")], ref.Bucket)
			_, err = reader.GetRange(ctx, ref, 0, int64(len(data))) // leaves an idle connection to az1
			require.NoError(t, err)

			require.NoError(t, objs.SetOutage("az1", true))
			_, err = reader.GetRange(ctx, ref, 0, 1)
			requireKind(t, err, storage.ErrUnavailable, "GetRange from the dead AZ over a kept-alive connection")
			t.Logf("GetRange from the dead AZ: %v", err)
			_, err = writer.Put(ctx, "outage/second", data)
			requireKind(t, err, storage.ErrUnavailable, "Put into the dead AZ")
			_, err = reader.List(ctx, ref.Bucket, "outage/")
			requireKind(t, err, storage.ErrUnavailable, "List of the dead AZ")
			requireKind(t, writer.Delete(ctx, []metadata.ObjectRef{ref}), storage.ErrUnavailable, "Delete in the dead AZ")

			other, err := reader.Put(ctx, "outage/object", data)
			require.NoError(t, err, "az2 is unaffected")
			got, err := writer.GetRange(ctx, other, 0, int64(len(data)))
			require.NoError(t, err, "az2 is unaffected for az1's brokers too")
			require.Equal(t, data, got)

			require.NoError(t, objs.SetOutage("az1", false))
			got, err = reader.GetRange(ctx, ref, 0, int64(len(data)))
			require.NoError(t, err, "az1 is back")
			require.Equal(t, data, got)
			infos, err := writer.List(ctx, ref.Bucket, "outage/")
			require.NoError(t, err)
			require.Len(t, infos, 1, "the Put during the outage stored nothing")

			require.Error(t, objs.SetOutage("az9", true), "an AZ the deployment does not have")
		})
	}
}

// zoneID is the AZ id standing for one of clustertest's AZs: directory
// bucket names need the region-azN form ("use1-az1"); the cluster calls
// its AZs az1..az3.
func zoneID(az string) string { return "use1-" + az }

// zonalObjects is a clustertest.Objects over the test server: one fresh
// directory-style bucket per AZ, each behind its own zonal endpoint.
type zonalObjects struct {
	cfg       aws.Config
	timeout   time.Duration             // Options.RequestTimeout of every store
	buckets   map[string]string         // AZ id -> bucket
	endpoints map[string]*zonalEndpoint // clustertest AZ -> endpoint
	byBucket  map[string]*zonalEndpoint // bucket -> its zonal endpoint

	mu     sync.Mutex
	stores []*s3express.Store
}

// newZonalObjects creates the buckets and starts their endpoints; when the
// test ends (after the cluster's brokers have stopped, since the cluster
// registers its cleanup later) it stops the endpoints and removes the
// buckets with everything in them.
func newZonalObjects(t *testing.T, cfg aws.Config, mode outage, requestTimeout time.Duration) *zonalObjects {
	t.Helper()
	server, err := url.Parse(aws.ToString(cfg.BaseEndpoint))
	require.NoError(t, err)
	o := &zonalObjects{
		cfg: cfg, timeout: requestTimeout,
		buckets:   make(map[string]string),
		endpoints: make(map[string]*zonalEndpoint),
		byBucket:  make(map[string]*zonalEndpoint),
	}
	// Buckets outlive the test on a server the developer runs, so each
	// test gets names of its own.
	base := fmt.Sprintf("at%08x", rand.Uint32())
	for _, az := range clustertest.AZs {
		o.buckets[zoneID(az)] = base + "--" + zoneID(az) + "--x-s3"
	}
	t.Logf("buckets %v", o.buckets)
	createBuckets(t, cfg, o.buckets)
	t.Cleanup(func() { removeBuckets(t, cfg, o.buckets) })
	for _, az := range clustertest.AZs {
		z, err := startZonalEndpoint(server.Host, mode)
		require.NoError(t, err)
		t.Cleanup(func() {
			z.close()
			if n, down := z.counts(); down > 0 {
				t.Logf("%s: %d operations, %d of them while the AZ was down (%v)", az, n, down, mode)
			}
		})
		o.endpoints[az] = z
		o.byBucket[o.buckets[zoneID(az)]] = z
	}
	t.Cleanup(func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, s := range o.stores {
			s.CloseIdleConnections()
		}
	})
	return o
}

// Store returns a new store for a broker in az, as its own process would
// build it: its own client and connection pool, writing to az's bucket and
// reaching every bucket through that bucket's zonal endpoint.
func (o *zonalObjects) Store(az string) (storage.ObjectStore, error) {
	if o.endpoints[az] == nil {
		return nil, fmt.Errorf("AZ %q is not one of %v", az, clustertest.AZs)
	}
	s, err := s3express.New(o.cfg, s3express.Options{
		Buckets: o.buckets, LocalAZ: zoneID(az), S3Compatible: true, RequestTimeout: o.timeout,
		ClientOptions: []func(*s3.Options){func(so *s3.Options) {
			so.EndpointResolverV2 = &zonalResolver{base: s3.NewDefaultEndpointResolverV2(), endpoints: o.byBucket}
		}},
	})
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.stores = append(o.stores, s)
	o.mu.Unlock()
	return s, nil
}

// SetOutage stops az's zonal endpoint, or starts it again.
func (o *zonalObjects) SetOutage(az string, down bool) error {
	z := o.endpoints[az]
	if z == nil {
		return fmt.Errorf("AZ %q is not one of %v", az, clustertest.AZs)
	}
	return z.setDown(down)
}

// zonalResolver sends each request to its bucket's zonal endpoint, as the
// SDK's own resolver does on AWS, where every directory bucket is served
// by its AZ's endpoint (s3express-use1-az4.us-east-1.amazonaws.com).
type zonalResolver struct {
	base      s3.EndpointResolverV2
	endpoints map[string]*zonalEndpoint // by bucket
}

func (r *zonalResolver) ResolveEndpoint(ctx context.Context, p s3.EndpointParameters) (smithyendpoints.Endpoint, error) {
	ep, err := r.base.ResolveEndpoint(ctx, p)
	if err != nil || p.Bucket == nil {
		return ep, err
	}
	z, ok := r.endpoints[*p.Bucket]
	if !ok {
		return ep, fmt.Errorf("no zonal endpoint for bucket %q", *p.Bucket)
	}
	z.countRequest()
	ep.URI.Host = z.addr
	return ep, nil
}

// outage is how a dead AZ's endpoint behaves.
type outage int

const (
	// refused: new connections are refused and open ones reset, as when
	// the AZ's hosts are gone but the network still answers for them.
	// Every request fails at once.
	refused outage = iota
	// silent: connections are accepted and requests swallowed, nothing
	// ever answered, and open connections go quiet mid-request, as when
	// the AZ's network drops packets. Every attempt lasts until the
	// store's per-attempt timeout (Options.RequestTimeout).
	silent
)

func (o outage) String() string {
	if o == silent {
		return "silent"
	}
	return "refused"
}

// zonalEndpoint is one AZ's S3 endpoint in the tests: a TCP forwarder on
// 127.0.0.1 in front of the shared test server, at an address fixed for
// its life, which can be taken down the two ways a dead AZ shows to a
// client (see outage). It is a forwarder rather than an http.RoundTripper
// that fails requests so that nothing above the socket is simulated: the
// SDK's transport, its retryer and the store's error mapping see real
// network failures (refused or reset connections, attempts timing out) and
// turn them into storage.ErrUnavailable by themselves.
type zonalEndpoint struct {
	target, addr string // the server's host:port; this endpoint's
	mode         outage

	mu      sync.Mutex
	ln      net.Listener // nil while down in refused mode, and once closed
	down    bool
	healed  chan struct{}         // closed when a silent outage ends
	clients map[net.Conn]struct{} // connections from stores
	ups     map[net.Conn]struct{} // connections to the server
	wg      sync.WaitGroup
	// requests and whileDown count the operations addressed to the
	// endpoint (before the SDK's retries) and those made during an
	// outage, so a test can tell whether an outage was ever noticed.
	requests, whileDown int
}

func startZonalEndpoint(target string, mode outage) (*zonalEndpoint, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	z := &zonalEndpoint{
		target: target, addr: ln.Addr().String(), mode: mode, ln: ln,
		clients: make(map[net.Conn]struct{}), ups: make(map[net.Conn]struct{}),
	}
	z.serve(ln)
	return z, nil
}

func (z *zonalEndpoint) serve(ln net.Listener) {
	z.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by setDown or close
			}
			z.wg.Go(func() { z.forward(c) })
		}
	})
}

func (z *zonalEndpoint) countRequest() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.requests++
	if z.down {
		z.whileDown++
	}
}

func (z *zonalEndpoint) counts() (requests, whileDown int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.requests, z.whileDown
}

// forward relays one store connection to the server until either side
// closes it or the endpoint goes down.
func (z *zonalEndpoint) forward(c net.Conn) {
	defer c.Close()
	if !z.track(z.clients, c) {
		return
	}
	defer z.untrack(z.clients, c)
	up, err := net.Dial("tcp", z.target)
	if err != nil {
		return
	}
	defer up.Close()
	if !z.track(z.ups, up) {
		z.park()
		return
	}
	defer z.untrack(z.ups, up)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, c)
		up.Close()
	}()
	// Ends when the server or the store closes, or an outage cuts the
	// connection to the server.
	_, _ = io.Copy(c, up)
	up.Close()
	z.park()
	c.Close()
	<-done
}

// track registers a live connection, unless the endpoint is down: then a
// refused-mode endpoint drops it, and a silent one parks it first.
func (z *zonalEndpoint) track(set map[net.Conn]struct{}, c net.Conn) bool {
	z.mu.Lock()
	if z.down || z.ln == nil {
		z.mu.Unlock()
		z.park()
		return false
	}
	set[c] = struct{}{}
	z.mu.Unlock()
	return true
}

func (z *zonalEndpoint) untrack(set map[net.Conn]struct{}, c net.Conn) {
	z.mu.Lock()
	defer z.mu.Unlock()
	delete(set, c)
}

// park holds a store's connection open and silent while a silent outage
// lasts: the store hears nothing until its attempt times out.
func (z *zonalEndpoint) park() {
	z.mu.Lock()
	healed := z.healed
	z.mu.Unlock()
	if healed != nil {
		<-healed
	}
}

// setDown starts or ends an outage.
func (z *zonalEndpoint) setDown(down bool) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if down == z.down {
		return nil
	}
	z.down = down
	switch {
	case down && z.mode == silent:
		z.healed = make(chan struct{})
		closeAll(z.ups, false)
	case down:
		z.ln.Close()
		z.ln = nil
		closeAll(z.ups, false)
		closeAll(z.clients, true)
	case z.mode == silent:
		close(z.healed)
		z.healed = nil
	default:
		ln, err := net.Listen("tcp", z.addr)
		if err != nil {
			return fmt.Errorf("zonal endpoint %s cannot come back: %w", z.addr, err)
		}
		z.ln = ln
		z.serve(ln)
	}
	return nil
}

// closeAll closes the connections of set, with a reset instead of an
// orderly close if reset is true.
func closeAll(set map[net.Conn]struct{}, reset bool) {
	for c := range set {
		if tc, ok := c.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		c.Close()
		delete(set, c)
	}
}

// close ends any outage, shuts the endpoint and waits for its goroutines.
func (z *zonalEndpoint) close() {
	_ = z.setDown(false)
	z.mu.Lock()
	if z.ln != nil {
		z.ln.Close()
		z.ln = nil
	}
	closeAll(z.ups, false)
	closeAll(z.clients, false)
	z.mu.Unlock()
	z.wg.Wait()
}

// removeBuckets deletes the buckets and every object in them.
func removeBuckets(t *testing.T, cfg aws.Config, buckets map[string]string) {
	ctx := context.Background()
	for _, az := range slices.Sorted(maps.Keys(buckets)) {
		s, err := s3express.New(cfg, s3express.Options{Buckets: buckets, LocalAZ: az, S3Compatible: true})
		require.NoError(t, err)
		infos, err := s.List(ctx, buckets[az], "")
		if err == nil {
			refs := make([]metadata.ObjectRef, len(infos))
			for i, info := range infos {
				refs[i] = info.Ref
			}
			err = s.Delete(ctx, refs)
		}
		if err == nil {
			_, err = s.Client().DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(buckets[az])})
		}
		var nsb *types.NoSuchBucket
		if err != nil && !errors.As(err, &nsb) {
			t.Errorf("removing bucket %s: %v", buckets[az], err)
		}
		s.CloseIdleConnections()
	}
}
