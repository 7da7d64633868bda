package main

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/activetier/activetier/storage"
)

// recordGen makes the demo's traffic: Kafka v2 record batches of
// application log lines (JSON, as a log shipper would produce them),
// deterministic for a seed. Batches are uncompressed, like a producer with
// compression.type=none, so the combiner's codec decides what is stored.
type recordGen struct {
	rng             *rand.Rand
	crc             *crc32.Table
	buf, line, body []byte
}

func newRecordGen(seed uint64) *recordGen {
	return &recordGen{
		rng: rand.New(rand.NewPCG(seed, 0x61637469766574)), // "activet"
		crc: crc32.MakeTable(crc32.Castagnoli),
	}
}

// next returns one batch of records from offset first at epoch, stamped
// now, holding about target bytes of records (at least one record). Its
// Data is the generator's buffer, which the next call overwrites: the
// caller copies it first (the producer's local log does, and the Node
// uploads the log's copy).
func (g *recordGen) next(epoch int32, first int64, now time.Time, target int) storage.Batch {
	const headerSize = 61
	ts := now.UnixMilli()
	b := append(g.buf[:0], make([]byte, headerSize)...)
	n := 0
	for len(b)-headerSize < target || n == 0 {
		b = g.appendRecord(b, n, now)
		n++
	}
	// RecordBatch v2 header, as Kafka writes it.
	binary.BigEndian.PutUint64(b[0:], uint64(first))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // batchLength: bytes after this field
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))    // partitionLeaderEpoch
	b[16] = 2                                            // magic
	binary.BigEndian.PutUint16(b[21:], 0)                // attributes: no compression, CreateTime
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))      // lastOffsetDelta
	binary.BigEndian.PutUint64(b[27:], uint64(ts))       // baseTimestamp
	binary.BigEndian.PutUint64(b[35:], uint64(ts))       // maxTimestamp
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))       // producerId -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)           // producerEpoch -1
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)       // baseSequence -1
	binary.BigEndian.PutUint32(b[57:], uint32(n))        // records
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], g.crc))
	g.buf = b
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: first + int64(n) - 1, MaxTimestamp: ts, Data: b}
}

// appendRecord appends record delta of a batch: a length-prefixed Kafka
// record whose key is a user id and whose value is one JSON log line.
func (g *recordGen) appendRecord(b []byte, delta int, now time.Time) []byte {
	// A handful of services and endpoints, so that lines repeat the way
	// real logs do and compress like them.
	services := [...]string{"checkout", "payments", "catalog", "search", "auth", "cart", "shipping", "recommendations"}
	methods := [...]string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	paths := [...]string{"/api/v2/orders/", "/api/v2/carts/", "/api/v2/products/", "/api/v2/users/", "/api/v2/search?q=", "/healthz?probe="}
	messages := [...]string{"request completed", "request completed", "request completed", "cache miss, loaded from db", "retrying upstream call", "slow query"}

	r := g.rng
	user := r.IntN(50_000)
	line := append(g.line[:0], `{"ts":"`...)
	line = now.Add(time.Duration(delta)*37*time.Microsecond).UTC().AppendFormat(line, "2006-01-02T15:04:05.000000Z")
	level := "INFO"
	switch p := r.IntN(100); {
	case p < 3:
		level = "ERROR"
	case p < 15:
		level = "WARN"
	case p < 20:
		level = "DEBUG"
	}
	line = append(line, `","level":"`...)
	line = append(line, level...)
	line = append(line, `","service":"`...)
	line = append(line, services[r.IntN(len(services))]...)
	line = append(line, `","host":"web-`...)
	line = strconv.AppendInt(line, int64(r.IntN(48)), 10)
	line = append(line, `","trace_id":"`...)
	line = strconv.AppendUint(line, r.Uint64()|1<<60, 16)
	line = append(line, `","method":"`...)
	line = append(line, methods[r.IntN(len(methods))]...)
	line = append(line, `","path":"`...)
	line = append(line, paths[r.IntN(len(paths))]...)
	line = strconv.AppendInt(line, int64(r.IntN(1_000_000)), 10)
	line = append(line, `","status":`...)
	status := 200
	switch level {
	case "ERROR":
		status = 500 + r.IntN(4)
	case "WARN":
		status = 400 + r.IntN(30)
	}
	line = strconv.AppendInt(line, int64(status), 10)
	line = append(line, `,"duration_ms":`...)
	line = strconv.AppendFloat(line, r.ExpFloat64()*12, 'f', 3, 64)
	line = append(line, `,"user_id":`...)
	line = strconv.AppendInt(line, int64(user), 10)
	line = append(line, `,"msg":"`...)
	line = append(line, messages[r.IntN(len(messages))]...)
	line = append(line, `"}`...)

	g.line = line

	body := append(g.body[:0], 0)                  // attributes
	body = binary.AppendVarint(body, 0)            // timestampDelta: the batch's produce time
	body = binary.AppendVarint(body, int64(delta)) // offsetDelta
	var key [20]byte
	k := strconv.AppendInt(key[:0], int64(user), 10)
	body = binary.AppendVarint(body, int64(len(k)))
	body = append(body, k...)
	body = binary.AppendVarint(body, int64(len(line)))
	body = append(body, line...)
	body = binary.AppendVarint(body, 0) // headers
	g.body = body
	b = binary.AppendVarint(b, int64(len(body)))
	return append(b, body...)
}
