package combiner

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Test data: Kafka-like record batches, generated deterministically from a
// seed so that every failure can be replayed.

// kafkaGen generates record batches shaped like Kafka's RecordBatch v2: a
// 61-byte header, then records with varint lengths, keys of 16 bytes from a
// small set, and JSON log-event values with the repetition real logs have.
type kafkaGen struct {
	rng  *rand.Rand
	keys [][]byte
	ts   int64
	crc  *crc32.Table
}

func newKafkaGen(seed uint64) *kafkaGen {
	g := &kafkaGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ts: 1_700_000_000_000, crc: crc32.MakeTable(crc32.Castagnoli)}
	for range 64 {
		k := make([]byte, 16)
		for i := range k {
			k[i] = "0123456789abcdef"[g.rng.IntN(16)]
		}
		g.keys = append(g.keys, k)
	}
	return g
}

// batch returns one batch of n records starting at offset.
func (g *kafkaGen) batch(offset int64, epoch int32, n int) storage.Batch {
	levels := [...]string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	services := [...]string{"checkout", "payments", "inventory", "search", "auth", "shipping"}
	messages := [...]string{
		"request completed", "order placed", "cache miss, loading from store",
		"retrying upstream call", "user session refreshed", "payment authorized",
		"inventory reserved", "slow query detected",
	}
	statuses := [...]int{200, 200, 200, 201, 404, 500}
	buf := make([]byte, 61, 61+n*200)
	base := g.ts
	var recs []byte
	for i := range n {
		g.ts += int64(g.rng.IntN(5))
		key := g.keys[g.rng.IntN(len(g.keys))]
		val := fmt.Appendf(nil, `{"ts":%d,"level":"%s","service":"%s","host":"ip-10-0-%d-%d","msg":"%s","trace_id":"%016x","latency_ms":%d,"status":%d}`,
			g.ts, levels[g.rng.IntN(len(levels))], services[g.rng.IntN(len(services))],
			g.rng.IntN(4), g.rng.IntN(32), messages[g.rng.IntN(len(messages))],
			g.rng.Uint64(), g.rng.IntN(900), statuses[g.rng.IntN(len(statuses))])
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, g.ts-base)
		rec = binary.AppendVarint(rec, int64(i))
		rec = binary.AppendVarint(rec, int64(len(key)))
		rec = append(rec, key...)
		rec = binary.AppendVarint(rec, int64(len(val)))
		rec = append(rec, val...)
		rec = binary.AppendVarint(rec, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(rec)))
		recs = append(recs, rec...)
	}
	buf = append(buf, recs...)
	be := binary.BigEndian // Kafka is big-endian
	be.PutUint64(buf[0:], uint64(offset))
	be.PutUint32(buf[8:], uint32(len(buf)-12))
	be.PutUint32(buf[12:], uint32(epoch))
	buf[16] = 2 // magic
	be.PutUint16(buf[21:], 0)
	be.PutUint32(buf[23:], uint32(n-1))
	be.PutUint64(buf[27:], uint64(base))
	be.PutUint64(buf[35:], uint64(g.ts))
	be.PutUint64(buf[43:], ^uint64(0)) // producer id -1
	be.PutUint16(buf[51:], 0xffff)
	be.PutUint32(buf[53:], 0xffffffff)
	be.PutUint32(buf[57:], uint32(n))
	be.PutUint32(buf[17:], crc32.Checksum(buf[21:], g.crc))
	return storage.Batch{Epoch: epoch, FirstOffset: offset, LastOffset: offset + int64(n) - 1, MaxTimestamp: g.ts, Data: buf}
}

// randomBatch returns a batch of size bytes of incompressible data.
func (g *kafkaGen) randomBatch(offset int64, epoch int32, size int) storage.Batch {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(g.rng.Uint32())
	}
	g.ts++
	return storage.Batch{Epoch: epoch, FirstOffset: offset, LastOffset: offset, MaxTimestamp: g.ts, Data: data}
}

// workload returns sections for partitions partitions of topics, each with
// batches batches of records records, offsets starting at a random
// point per partition and with occasional gaps.
func (g *kafkaGen) workload(partitions, batches, records int) []SectionInput {
	sections := make([]SectionInput, partitions)
	for p := range sections {
		tp := metadata.TopicPartition{Topic: fmt.Sprintf("topic-%d", p%7), Partition: int32(p)}
		if p%3 == 0 {
			tp.TopicID = [16]byte{byte(p % 7), 0xAC, 0x71}
		}
		off := int64(g.rng.IntN(1_000_000))
		epoch := int32(g.rng.IntN(20))
		s := SectionInput{Partition: tp}
		for range batches {
			b := g.batch(off, epoch, records)
			s.Batches = append(s.Batches, b)
			off = b.LastOffset + 1 + int64(g.rng.IntN(2))
		}
		sections[p] = s
	}
	return sections
}

func totalBytes(sections []SectionInput) int {
	n := 0
	for _, s := range sections {
		for _, b := range s.Batches {
			n += len(b.Data)
		}
	}
	return n
}
