package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxRequestBytes is Kafka's socket.request.max.bytes default: a larger
// size prefix is a broken or hostile client, whose connection is closed.
const maxRequestBytes = 100 << 20

// pipelineDepth bounds the requests of one connection read ahead of their
// responses (Kafka's max.in.flight.requests.per.connection is 5 by
// default in clients).
const pipelineDepth = 16

// supported is what ApiVersions advertises: the requests served, at the
// versions whose every field the handlers honour. Fetch stops at 12 and
// Metadata at 9 because later versions name topics by ID. FindCoordinator
// is served only to say there is no coordinator: librdkafka does not ask
// a broker that does not advertise it, and its group consumer then waits
// for ever instead of reporting anything.
var supported = []struct{ key, min, max int16 }{
	{kmsg.Produce.Int16(), 3, 9},
	{kmsg.Fetch.Int16(), 4, 12},
	{kmsg.ListOffsets.Int16(), 0, 7},
	{kmsg.Metadata.Int16(), 0, 9},
	{kmsg.ApiVersions.Int16(), 0, 3},
	{kmsg.OffsetForLeaderEpoch.Int16(), 2, 4},
	{kmsg.InitProducerID.Int16(), 0, 4},
	{kmsg.FindCoordinator.Int16(), 0, 4},
	{kmsg.CreateTopics.Int16(), 0, 7},
}

func versionSupported(key, version int16) bool {
	for _, s := range supported {
		if s.key == key {
			return version >= s.min && version <= s.max
		}
	}
	return false
}

// serveKafka accepts Kafka clients until ctx ends, then closes every
// connection and waits for their goroutines.
func (b *Broker) serveKafka(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { b.cfg.Kafka.Close() })
	defer stop()
	for {
		conn, err := b.cfg.Kafka.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("broker: kafka listener: %w", err)
		}
		wg.Go(func() { b.serveConn(ctx, conn) })
	}
}

// request is one parsed request of a connection.
type request struct {
	key, version int16
	corr         int32
	kreq         kmsg.Request // nil for a key kmsg does not know
}

// reply is what the writer sends for one request: it may wait (a fetch's
// long poll, acks=all) and returns nil for no response (acks=0).
type reply func(ctx context.Context) kmsg.Response

// serveConn reads requests in order and handles each at once (a produce
// appends before the next request is read, so offsets follow the
// connection's order), while a writer sends the responses in request
// order, waiting for each in turn: a produce waiting for acks does not
// stop the next one from being appended.
func (b *Broker) serveConn(ctx context.Context, conn net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()

	type pending struct {
		req   request
		reply reply
	}
	queue := make(chan pending, pipelineDepth)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer cancel() // a failed write ends the reader too
		w := bufio.NewWriter(conn)
		var buf []byte
		for p := range queue {
			resp := p.reply(ctx)
			if resp == nil {
				continue
			}
			buf = appendResponse(buf[:0], p.req, resp)
			if _, err := w.Write(buf); err != nil {
				return
			}
			if len(queue) == 0 {
				if err := w.Flush(); err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(queue)
		<-writerDone
	}()

	r := bufio.NewReader(conn)
	size := make([]byte, 4)
	for {
		if _, err := io.ReadFull(r, size); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size)
		if n < 8 || n > maxRequestBytes {
			b.lg.Warn("closing a connection: bad request size", "remote", conn.RemoteAddr().String(), "size", n)
			return
		}
		body, err := readFrame(r, int(n))
		if err != nil {
			return
		}
		req, err := parseRequest(body)
		if err != nil {
			// A request that cannot be parsed leaves nothing to
			// answer it with: Kafka closes the connection too.
			b.lg.Warn("closing a connection: malformed request", "remote", conn.RemoteAddr().String(), "key", req.key, "version", req.version, "err", err)
			return
		}
		rep := b.handle(ctx, req)
		select {
		case queue <- pending{req, rep}:
		case <-ctx.Done():
			return
		}
	}
}

// readFrame reads a request's n bytes: at once up to 1 MiB (most
// requests), beyond that into a buffer that doubles as they arrive, so a
// client that announces maxRequestBytes and sends nothing holds about
// what it sent, not what it announced.
func readFrame(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, min(n, 1<<20))
	for read := 0; ; {
		if _, err := io.ReadFull(r, buf[read:]); err != nil {
			return nil, err
		}
		if len(buf) == n {
			return buf, nil
		}
		read = len(buf)
		buf = slices.Grow(buf, min(n, 2*read)-read)[:min(n, 2*read)]
	}
}

// parseRequest reads the request header (v1, or v2 for flexible requests)
// and the body. The body of a request this broker does not serve only
// names what the answer should list; if kmsg cannot read it (a version
// newer than kmsg knows), the answer lists nothing.
func parseRequest(body []byte) (request, error) {
	rd := kbin.Reader{Src: body}
	req := request{key: rd.Int16(), version: rd.Int16(), corr: rd.Int32()}
	rd.NullableString() // client ID
	if !rd.Ok() {
		return req, errors.New("truncated request header")
	}
	kreq := kmsg.RequestForKey(req.key)
	if kreq == nil {
		return req, nil
	}
	served := versionSupported(req.key, req.version)
	req.kreq = kreq
	if req.version < 0 || req.version > kreq.MaxVersion() {
		return req, nil
	}
	kreq.SetVersion(req.version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return req, errors.New("truncated request header")
	}
	if err := kreq.ReadFrom(rd.Src); err != nil {
		if served {
			return req, err
		}
		req.kreq = kmsg.RequestForKey(req.key)
		req.kreq.SetVersion(req.version)
	}
	return req, nil
}

// appendResponse frames resp: size, correlation ID, and the tagged fields
// of a flexible response header (never for ApiVersions, whose response
// header stays v0 so that any client can read it).
func appendResponse(buf []byte, req request, resp kmsg.Response) []byte {
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(req.corr))
	if resp == unknownKeyResponse {
		buf = binary.BigEndian.AppendUint16(buf, uint16(kerr.UnsupportedVersion.Code))
	} else {
		if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
			buf = append(buf, 0)
		}
		buf = resp.AppendTo(buf)
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// unknownKeyResponse marks the answer to a request key kmsg does not
// know: a body of just an UNSUPPORTED_VERSION error code, as ApiVersions
// v0 answers begin.
var unknownKeyResponse kmsg.Response = &kmsg.ApiVersionsResponse{}

// handle answers one request, or returns the wait that will.
func (b *Broker) handle(ctx context.Context, req request) reply {
	now := func(r kmsg.Response) reply { return func(context.Context) kmsg.Response { return r } }
	switch {
	case req.kreq == nil:
		return now(unknownKeyResponse)
	case req.key == kmsg.ApiVersions.Int16():
		return now(b.apiVersions(req))
	case !versionSupported(req.key, req.version):
		return now(unsupported(req))
	}
	switch r := req.kreq.(type) {
	case *kmsg.MetadataRequest:
		return now(b.metadata(r))
	case *kmsg.ProduceRequest:
		return b.handleProduce(ctx, r)
	case *kmsg.FetchRequest:
		return func(ctx context.Context) kmsg.Response { return b.fetch(ctx, r) }
	case *kmsg.ListOffsetsRequest:
		return now(b.listOffsets(ctx, r))
	case *kmsg.OffsetForLeaderEpochRequest:
		return now(b.offsetForLeaderEpoch(r))
	case *kmsg.InitProducerIDRequest:
		return now(b.initProducerID(r))
	case *kmsg.FindCoordinatorRequest:
		return now(findCoordinator(r))
	case *kmsg.CreateTopicsRequest:
		return func(ctx context.Context) kmsg.Response { return b.createTopics(ctx, r) }
	}
	return now(unsupported(req))
}

func (b *Broker) apiVersions(req request) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = req.version
	if !versionSupported(req.key, req.version) {
		// Kafka answers an ApiVersions it cannot read at version 0,
		// with its versions, so the client can retry at one it has.
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	}
	for _, s := range supported {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = s.key, s.min, s.max
		if s.key == kmsg.Produce.Int16() {
			// As Kafka 4.0 does (KAFKA-18659): librdkafka
			// compresses with gzip, snappy or lz4 only for a broker
			// that lists Produce v0, and otherwise sends the batch
			// uncompressed without a word. Produce v0-v2 are still
			// answered UNSUPPORTED_VERSION.
			k.MinVersion = 0
		}
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

// unsupported answers a request this broker does not serve, at the
// version it was sent at, with UNSUPPORTED_VERSION in every error code
// of the response: top-level ones, and one per topic, partition or
// resource the request named (copied from it), so a client learns the
// outcome of everything it asked for instead of waiting or finding it
// missing.
func unsupported(req request) kmsg.Response {
	resp := req.kreq.ResponseKind()
	resp.SetVersion(req.version)
	mirror(reflect.ValueOf(req.kreq).Elem(), reflect.ValueOf(resp).Elem(), kerr.UnsupportedVersion.Code)
	return resp
}

// mirror fills dst, a response struct, from src, the request struct: each
// ErrorCode field gets code, fields of src with the same name and type are
// copied (topic names, partitions, resource names), and lists get one
// element per element of the request's list of the same name, filled the
// same way. A request's list of names or numbers (FindCoordinator's keys,
// OffsetFetch's partitions) gives elements named by their first field of
// that kind, and lists named differently (CreateACLs' creations and its
// results) are paired in order, or all go to the response's one list.
func mirror(src, dst reflect.Value, code int16) {
	var dstLists, srcLists []reflect.Value
	for i := range dst.NumField() {
		f := dst.Type().Field(i)
		d := dst.Field(i)
		if !f.IsExported() || f.Name == "Version" || f.Name == "UnknownTags" {
			continue
		}
		if f.Name == "ErrorCode" && d.Kind() == reflect.Int16 {
			d.SetInt(int64(code))
			continue
		}
		s := src.FieldByName(f.Name)
		switch {
		case !s.IsValid() || s.Kind() != d.Kind():
			if d.Kind() == reflect.Slice {
				dstLists = append(dstLists, d)
			}
		case d.Kind() == reflect.Slice:
			fillList(s, d, code)
		case s.Type() == d.Type() && (d.Kind() == reflect.String || d.Kind() == reflect.Int32 || d.Kind() == reflect.Int8 ||
			d.Kind() == reflect.Pointer && d.Type().Elem().Kind() == reflect.String || d.Kind() == reflect.Array):
			d.Set(s)
		}
	}
	if len(dstLists) == 0 {
		return
	}
	for i := range src.NumField() {
		f := src.Type().Field(i)
		if s := src.Field(i); f.IsExported() && s.Kind() == reflect.Slice && f.Name != "UnknownTags" && !dst.FieldByName(f.Name).IsValid() {
			srcLists = append(srcLists, s)
		}
	}
	switch {
	case len(dstLists) == 1:
		all := reflect.MakeSlice(dstLists[0].Type(), 0, 0)
		for _, s := range srcLists {
			one := reflect.New(dstLists[0].Type()).Elem()
			fillList(s, one, code)
			all = reflect.AppendSlice(all, one)
		}
		dstLists[0].Set(all)
	case len(dstLists) == len(srcLists):
		for i := range dstLists {
			fillList(srcLists[i], dstLists[i], code)
		}
	}
}

// fillList makes d, a response list, one element per element of s.
func fillList(s, d reflect.Value, code int16) {
	if d.Type().Elem().Kind() != reflect.Struct {
		if s.Type() == d.Type() {
			d.Set(s)
		}
		return
	}
	out := reflect.MakeSlice(d.Type(), s.Len(), s.Len())
	for j := range s.Len() {
		if s.Type().Elem().Kind() == reflect.Struct {
			mirror(s.Index(j), out.Index(j), code)
		} else {
			mirror(reflect.New(d.Type().Elem()).Elem(), out.Index(j), code)
			setFirst(out.Index(j), s.Index(j))
		}
	}
	d.Set(out)
}

// setFirst sets the first field of struct dst whose type is v's.
func setFirst(dst, v reflect.Value) {
	for i := range dst.NumField() {
		if dst.Type().Field(i).IsExported() && dst.Field(i).Type() == v.Type() {
			dst.Field(i).Set(v)
			return
		}
	}
}

// waitOrTimeout is a context bounded by a request's timeout in ms.
func waitOrTimeout(ctx context.Context, millis int32) (context.Context, context.CancelFunc) {
	if millis < 0 {
		millis = 0
	}
	return context.WithTimeout(ctx, time.Duration(millis)*time.Millisecond)
}
