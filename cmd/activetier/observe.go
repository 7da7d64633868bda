package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/promexport"
	"github.com/activetier/activetier/storage"
)

// meteredObjects wraps every broker's store of a backend in one Meter: the
// demo is one process, so one ledger sees every PUT and GET.
type meteredObjects struct {
	objectBackend
	meter *metering.Meter
}

func (m meteredObjects) store(az string) (storage.ObjectStore, error) {
	s, err := m.objectBackend.store(az)
	if err != nil {
		return nil, err
	}
	return m.meter.Store(s), nil
}

// demoPrices is the price list a run is costed with: the store's own with
// --store, else the one of the latency profile's service.
func demoPrices(o *demoOptions, onStore storeBackend) costmodel.Prices {
	switch {
	case onStore != nil:
		return onStore.prices()
	case o.profile == "s3standard":
		return costmodel.S3Standard2025()
	}
	return costmodel.S3Express2025()
}

// metricsServer serves /metrics from its own registry while the demo runs.
type metricsServer struct {
	reg  *prometheus.Registry
	srv  *http.Server
	addr string
	done chan error
}

// serveMetrics listens on addr at once (so that a bad address fails the
// command before the run) and serves the registry's metrics until close.
func serveMetrics(addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	m := &metricsServer{reg: reg, addr: ln.Addr().String(), done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// register adds the run's Meter and brokers to the registry.
func (m *metricsServer) register(meter *metering.Meter, s *sim) error {
	nodes := make([]promexport.Node, len(s.brokers))
	for i, b := range s.brokers {
		nodes[i] = promexport.Node{Broker: strconv.Itoa(int(b.ID)), Engine: b.Node}
	}
	c, err := promexport.New(promexport.Config{Meter: meter, Nodes: nodes})
	if err != nil {
		return err
	}
	return m.reg.Register(c)
}

func (m *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// compressionSample measures what producers with compression.type set to
// the sections' codec would send: every sampleEvery-th batch is compressed
// on its own, as a Kafka producer compresses a batch, and the ratio of the
// sample is applied to every byte produced. Broker-to-broker replication
// copies batches as producers sent them, so this is the like-for-like
// baseline for objects whose sections use the same codec.
type compressionSample struct {
	codec metadata.Codec
	zstd  *zstd.Encoder
	n     int
	buf   []byte
	// raw and packed are read by the report's sampler while the producer
	// adds to them.
	raw, packed atomic.Int64
}

const sampleEvery = 16

func newCompressionSample(codec metadata.Codec) (*compressionSample, error) {
	c := &compressionSample{codec: codec}
	if codec == metadata.CodecZstd {
		var err error
		// The combiner's default level, zstd's own.
		if c.zstd, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// add offers one produced batch; only the producer's goroutine calls it.
func (c *compressionSample) add(data []byte) {
	c.n++
	if c.n%sampleEvery != 1 {
		return
	}
	c.raw.Add(int64(len(data)))
	switch c.codec {
	case metadata.CodecZstd:
		c.buf = c.zstd.EncodeAll(data, c.buf[:0])
	case metadata.CodecS2:
		c.buf = s2.Encode(c.buf[:cap(c.buf)], data)
	default:
		c.buf = data
	}
	// A producer sends a batch uncompressed when compression does not pay.
	c.packed.Add(int64(min(len(c.buf), len(data))))
}

// ratio is compressed bytes per produced byte, 1 before any sample.
func (c *compressionSample) ratio() float64 {
	packed, raw := c.packed.Load(), c.raw.Load()
	if raw == 0 {
		return 1
	}
	return float64(packed) / float64(raw)
}

func (c *compressionSample) close() {
	if c.zstd != nil {
		c.zstd.Close()
	}
}
