package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/internal/harness/testenv"
)

var update = flag.Bool("update", false, "rewrite the compatibility table in README.md with what TestCompatibility measures")

// failFast is how soon a client must report what the broker does not
// support (consumer groups) for the table to say it fails fast.
const failFast = 10 * time.Second

// The README's table lies between these lines.
const (
	tableBegin = "<!-- compatibility table: written by TestCompatibility -update -->\n"
	tableEnd   = "<!-- end of the compatibility table -->\n"
)

var (
	acksLevels = []string{"0", "1", "all"}
	codecs     = []struct {
		name string
		kgo  kgo.CompressionCodec
		attr uint8 // the batch attribute's codec
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
)

// The records every produce cell writes, compressible so that librdkafka
// keeps them compressed.
const cellRecords = 100

// compatClient is one Kafka client under test, doing what a cell asks.
type compatClient interface {
	// header is the client and its version, the table's column header.
	header() string
	// produce writes values to topic's partition, in order.
	produce(ctx context.Context, topic string, partition int32, acks, codec string, idempotent bool, values []string) error
	// consume reads n values of topic's partition from offset 0, as a
	// client in rack.
	consume(ctx context.Context, topic string, partition int32, rack string, n int) ([]string, error)
	// offsets lists the earliest and latest offsets and the first at
	// or after ts.
	offsets(ctx context.Context, topic string, partition int32, ts int64) (earliest, latest, byTime int64, err error)
	// createTopic creates a topic; errNoAdmin if the client cannot.
	createTopic(ctx context.Context, topic string, partitions, rf int) error
	// group joins a consumer group of topic and returns the first
	// error the client reports within failFast, or nil.
	group(ctx context.Context, topic string) error
}

var errNoAdmin = errors.New("the client has no admin API")

// TestCompatibility measures what franz-go's kgo, kcat and Python's
// confluent-kafka (both librdkafka) can do against three broker
// processes, at their defaults but for what each cell sets, and requires
// the compatibility table in README.md to be exactly what it measured
// (-update rewrites it). Every produce cell is read back and checked
// record for record and for the codec the batches are stored with.
func TestCompatibility(t *testing.T) {
	t.Parallel() // its own processes, buckets and metadata cluster
	kcat := testenv.Tool(t, "kcat")
	python := testenv.Python(t, "confluent_kafka", "python3-confluent-kafka")
	c := startProcCluster(t, map[string]int{"compat-kgo": 16, "compat-kcat": 16, "compat-python": 16, "consume": 1, "offsets": 1})
	bootstrap := strings.Join(c.seeds(), ",")
	clients := []compatClient{
		&kgoCompat{seeds: c.seeds()},
		newKcatCompat(t, kcat, bootstrap),
		newPythonCompat(t, python, bootstrap),
	}
	names := []string{"compat-kgo", "compat-kcat", "compat-python"}
	consumeValues := fillConsumeTopic(t, c)
	fillOffsetsTopic(t, c)

	type row struct {
		name string
		cell func(ctx context.Context, i int, cl compatClient) string
	}
	var rows []row
	for ai, acks := range acksLevels {
		for ci, codec := range codecs {
			partition := int32(ai*len(codecs) + ci)
			rows = append(rows, row{fmt.Sprintf("produce, acks=%s, %s", acks, codec.name), func(ctx context.Context, i int, cl compatClient) string {
				return produceCell(ctx, t, c, cl, names[i], partition, acks, codec.name, codec.attr, false)
			}})
		}
	}
	rows = append(rows,
		row{"idempotent produce", func(ctx context.Context, i int, cl compatClient) string {
			return produceCell(ctx, t, c, cl, names[i], 15, "all", "none", 0, true)
		}},
		row{"consume from the leader", func(ctx context.Context, _ int, cl compatClient) string {
			return consumeCell(ctx, t, c, cl, consumeValues, "az0", 0)
		}},
		row{"consume from a follower in the client's rack", func(ctx context.Context, _ int, cl compatClient) string {
			return consumeCell(ctx, t, c, cl, consumeValues, "az2", 2)
		}},
	)
	var listed [3][3]int64
	offsetRow := func(name string, which int, want int64) row {
		return row{name, func(ctx context.Context, i int, cl compatClient) string {
			if which == 0 {
				e, l, b, err := cl.offsets(ctx, "offsets", 0, offsetsInside)
				if err != nil {
					return "no: " + firstLine(err)
				}
				listed[i] = [3]int64{e, l, b}
			}
			if got := listed[i][which]; got != want {
				return fmt.Sprintf("no: %d, not %d", got, want)
			}
			return "yes"
		}}
	}
	rows = append(rows,
		offsetRow("ListOffsets earliest", 0, 0),
		offsetRow("ListOffsets latest", 1, 8),
		offsetRow("ListOffsets by time, inside a batch", 2, offsetsInsideAt),
		row{"create topic", func(ctx context.Context, i int, cl compatClient) string {
			return createCell(ctx, t, c, cl, "created-"+strings.TrimPrefix(names[i], "compat-"))
		}},
		row{"consumer group (not supported)", func(ctx context.Context, _ int, cl compatClient) string {
			began := time.Now()
			err := cl.group(ctx, "consume")
			switch {
			case err == nil:
				return fmt.Sprintf("no: nothing reported in %v", failFast)
			case !strings.Contains(err.Error(), "no group or transaction coordinator") && !errors.Is(err, kerr.InvalidRequest):
				return "no: " + firstLine(err)
			}
			t.Logf("%s reported the consumer group's failure after %v: %v", cl.header(), time.Since(began).Round(time.Millisecond), firstLine(err))
			return "fails fast"
		}},
	)

	cells := make([][]string, len(rows))
	for i, cl := range clients {
		began := time.Now()
		for r, row := range rows {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			cells[r] = append(cells[r], row.cell(ctx, i, cl))
			cancel()
		}
		t.Logf("%s: every cell in %v", cl.header(), time.Since(began).Round(time.Millisecond))
	}
	var table strings.Builder
	table.WriteString("|  |")
	for _, cl := range clients {
		fmt.Fprintf(&table, " %s |", cl.header())
	}
	table.WriteString("\n|---|" + strings.Repeat("---|", len(clients)) + "\n")
	for r, row := range rows {
		fmt.Fprintf(&table, "| %s | %s |\n", row.name, strings.Join(cells[r], " | "))
	}
	t.Logf("measured:\n%s", table.String())

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	head, rest, ok := strings.Cut(string(readme), tableBegin)
	require.True(t, ok, "README.md has no line %q", tableBegin)
	old, tail, ok := strings.Cut(rest, tableEnd)
	require.True(t, ok, "README.md has no line %q", tableEnd)
	if *update {
		require.NoError(t, os.WriteFile("README.md", []byte(head+tableBegin+table.String()+tableEnd+tail), 0o644))
		return
	}
	require.Equal(t, old, table.String(), "README.md's compatibility table is not what this run measured; "+
		"if the change is intended, rerun with -update")
}

// produceCell has cl produce records to partition, reads them back with
// kgo, and checks each record and the codec it is stored with (and, for
// an idempotent producer, that its batches carry a producer id).
func produceCell(ctx context.Context, t *testing.T, c *procCluster, cl compatClient, topic string, partition int32, acks, codec string, attr uint8, idempotent bool) string {
	values := make([]string, cellRecords)
	for i := range values {
		values[i] = fmt.Sprintf("%s-%d-%03d-%s", topic, partition, i, strings.Repeat("x", 200))
	}
	if err := cl.produce(ctx, topic, partition, acks, codec, idempotent, values); err != nil {
		return "no: " + firstLine(err)
	}
	records, err := readBack(ctx, c, topic, partition, len(values))
	if err != nil {
		return "no: " + firstLine(err)
	}
	for i, r := range records {
		switch {
		case string(r.Value) != values[i]:
			return fmt.Sprintf("no: record %d is %.20q", i, r.Value)
		case r.Attrs.CompressionType() != attr:
			return fmt.Sprintf("no: stored with codec %d", r.Attrs.CompressionType())
		case idempotent && r.ProducerID < 0:
			return "no: the batches carry no producer id"
		}
	}
	return "yes"
}

// readBack reads n records of topic's partition from offset 0 with kgo,
// and then checks that the high watermark is n: none stored twice.
func readBack(ctx context.Context, c *procCluster, topic string, partition int32, n int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(0)}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			return nil, err
		}
		got = append(got, fs.Records()...)
	}
	if len(got) < n {
		return nil, fmt.Errorf("read %d records of %d", len(got), n)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if end, _ := ends.Lookup(topic, partition); end.Offset != int64(n) {
		return nil, fmt.Errorf("%d records stored, %d produced", end.Offset, n)
	}
	return got, nil
}

// fillConsumeTopic writes records to the consume topic with kgo, a batch
// of each codec, and returns their values.
func fillConsumeTopic(t *testing.T, c *procCluster) []string {
	t.Helper()
	var values []string
	for _, codec := range codecs {
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("consume"), kgo.ProducerBatchCompression(codec.kgo))
		require.NoError(t, err)
		for i := range 40 {
			v := fmt.Sprintf("consume-%s-%02d-%s", codec.name, i, strings.Repeat("y", 100))
			values = append(values, v)
			prod.Produce(t.Context(), &kgo.Record{Value: []byte(v)}, nil)
		}
		require.NoError(t, prod.Flush(t.Context()))
		prod.Close()
	}
	return values
}

// consumeCell has cl read the consume topic as a client in rack, and
// checks what it read and that broker served it.
func consumeCell(ctx context.Context, t *testing.T, c *procCluster, cl compatClient, want []string, rack string, served int) string {
	before := c.status(served)
	got, err := cl.consume(ctx, "consume", 0, rack, len(want))
	if err != nil {
		return "no: " + firstLine(err)
	}
	if !slices.Equal(got, want) {
		return fmt.Sprintf("no: read %d records, not the %d written", len(got), len(want))
	}
	after := c.status(served)
	if after.ServedLeader+after.ServedFollower == before.ServedLeader+before.ServedFollower {
		return fmt.Sprintf("no: broker %d served nothing", served)
	}
	return "yes"
}

// The offsets topic: two batches of four records, at these timestamps
// (ms); offsetsInside lies inside the first, whose first record at or
// after it is at offset offsetsInsideAt.
var offsetsTimestamps = [][]int64{{1000, 1000, 2000, 3000}, {3000, 4000, 4000, 5000}}

const offsetsInside, offsetsInsideAt = 1001, 2

// fillOffsetsTopic writes the offsets topic's two batches with kgo and
// checks, with a raw Fetch from its leader, broker 0, that each is one
// batch.
func fillOffsetsTopic(t *testing.T, c *procCluster) {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("offsets"), kgo.ProducerLinger(time.Minute))
	require.NoError(t, err)
	defer prod.Close()
	for _, batch := range offsetsTimestamps {
		for _, ts := range batch {
			prod.Produce(t.Context(), &kgo.Record{Value: []byte("v"), Timestamp: time.UnixMilli(ts)}, nil)
		}
		require.NoError(t, prod.Flush(t.Context()))
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MinBytes = 1<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "offsets"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := prod.Broker(0).Request(t.Context(), req) // the leader
	require.NoError(t, err)
	fetched := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	require.Zero(t, fetched.ErrorCode, "fetching the offsets topic")
	raw := fetched.RecordBatches
	for i := range offsetsTimestamps {
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(raw))
		require.Equal(t, int32(len(offsetsTimestamps[i])), rb.NumRecords, "batch %d", i)
		raw = raw[12+rb.Length:]
	}
}

// createCell has cl create a topic of 3 partitions on 2 replicas, and
// checks that every broker has it so.
func createCell(ctx context.Context, t *testing.T, c *procCluster, cl compatClient, topic string) string {
	err := cl.createTopic(ctx, topic, 3, 2)
	if errors.Is(err, errNoAdmin) {
		return "n/a: no admin commands"
	}
	if err != nil {
		return "no: " + firstLine(err)
	}
	for _, b := range c.infos {
		adm, err := kgo.NewClient(kgo.SeedBrokers(b.Kafka))
		require.NoError(t, err)
		details, err := kadm.NewClient(adm).ListTopics(ctx, topic)
		adm.Close()
		if err != nil {
			return "no: " + firstLine(err)
		}
		d := details[topic]
		if d.Err != nil || len(d.Partitions) != 3 || len(d.Partitions[0].Replicas) != 2 {
			return fmt.Sprintf("no: broker %d has %d partitions (%v)", b.ID, len(d.Partitions), d.Err)
		}
	}
	return "yes"
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return strings.ReplaceAll(s, "|", "/")
}

// kgoCompat is franz-go's kgo at its defaults: an idempotent producer
// with acks=all, which kgo requires to be turned off for acks 0 and 1.
type kgoCompat struct{ seeds []string }

func (k *kgoCompat) header() string {
	version := "(unknown version)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				version = d.Version
			}
		}
	}
	return "franz-go kgo " + version
}

func (k *kgoCompat) produce(ctx context.Context, topic string, partition int32, acks, codec string, idempotent bool, values []string) error {
	opts := []kgo.Opt{kgo.SeedBrokers(k.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	for _, c := range codecs {
		if c.name == codec {
			opts = append(opts, kgo.ProducerBatchCompression(c.kgo))
		}
	}
	switch acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

func (k *kgoCompat) consume(ctx context.Context, topic string, partition int32, rack string, n int) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.seeds...), kgo.Rack(rack), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(0)}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []string
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			return nil, err
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got, ctx.Err()
}

func (k *kgoCompat) offsets(ctx context.Context, topic string, partition int32, ts int64) (earliest, latest, byTime int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.seeds...))
	if err != nil {
		return 0, 0, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	get := func(l kadm.ListedOffsets, err error) int64 {
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return -1
		}
		o, _ := l.Lookup(topic, partition)
		return o.Offset
	}
	earliest = get(adm.ListStartOffsets(ctx, topic))
	latest = get(adm.ListEndOffsets(ctx, topic))
	byTime = get(adm.ListOffsetsAfterMilli(ctx, ts, topic))
	return earliest, latest, byTime, nil
}

func (k *kgoCompat) createTopic(ctx context.Context, topic string, partitions, rf int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), int16(rf), nil, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

func (k *kgoCompat) group(ctx context.Context, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.seeds...), kgo.ConsumerGroup("compat-kgo"), kgo.ConsumeTopics(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, failFast)
	defer cancel()
	for ctx.Err() == nil {
		if err := cl.PollFetches(ctx).Err0(); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// kcatCompat is kcat, librdkafka's command-line client, at librdkafka's
// defaults.
type kcatCompat struct {
	path, bootstrap, version, librdkafka string
	dir                                  string
}

func newKcatCompat(t *testing.T, path, bootstrap string) *kcatCompat {
	t.Helper()
	out, err := exec.Command(path, "-V").CombinedOutput()
	require.NoError(t, err, "kcat -V: %s", out)
	m := regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`).FindSubmatch(out)
	require.NotNil(t, m, "kcat -V: %s", out)
	return &kcatCompat{path: path, bootstrap: bootstrap, version: string(m[1]), librdkafka: string(m[2]), dir: t.TempDir()}
}

func (k *kcatCompat) header() string {
	return fmt.Sprintf("kcat %s (librdkafka %s)", k.version, k.librdkafka)
}

// run runs kcat with args and returns its standard output, or an error
// with its standard error.
func (k *kcatCompat) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.path, append([]string{"-b", k.bootstrap}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

func (k *kcatCompat) produce(ctx context.Context, topic string, partition int32, acks, codec string, idempotent bool, values []string) error {
	path, err := writeValues(k.dir, topic, partition, values)
	if err != nil {
		return err
	}
	args := []string{"-P", "-t", topic, "-p", fmt.Sprint(partition), "-X", "acks=" + acks, "-z", codec, "-l", path}
	if idempotent {
		args = append(args, "-X", "enable.idempotence=true")
	}
	_, err = k.run(ctx, args...)
	return err
}

// writeValues writes values to a file in dir, one a line, for a client
// that produces a file's lines, and returns its path.
func writeValues(dir, topic string, partition int32, values []string) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-%d", topic, partition))
	return path, os.WriteFile(path, []byte(strings.Join(values, "\n")+"\n"), 0o644)
}

func (k *kcatCompat) consume(ctx context.Context, topic string, partition int32, rack string, n int) ([]string, error) {
	out, err := k.run(ctx, "-C", "-t", topic, "-p", fmt.Sprint(partition), "-o", "beginning", "-c", fmt.Sprint(n), "-e", "-q",
		"-X", "client.rack="+rack, "-f", "%s\n")
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"), nil
}

func (k *kcatCompat) offsets(ctx context.Context, topic string, partition int32, ts int64) (earliest, latest, byTime int64, err error) {
	// kcat -Q lists offsets for times (-2 earliest, -1 latest); -o s@ts
	// seeks to a time, both with librdkafka's offsetsForTimes.
	query := func(ts int64) (int64, error) {
		out, err := k.run(ctx, "-Q", "-t", fmt.Sprintf("%s:%d:%d", topic, partition, ts))
		if err != nil {
			return 0, err
		}
		_, n, ok := strings.Cut(strings.TrimSpace(string(out)), " offset ")
		if !ok {
			return 0, fmt.Errorf("kcat -Q printed %q", out)
		}
		return strconv.ParseInt(n, 10, 64)
	}
	if earliest, err = query(-2); err != nil {
		return
	}
	if latest, err = query(-1); err != nil {
		return
	}
	out, err := k.run(ctx, "-C", "-t", topic, "-p", fmt.Sprint(partition), "-o", fmt.Sprintf("s@%d", ts), "-c", "1", "-e", "-q", "-f", "%o\n")
	if err != nil {
		return
	}
	byTime, err = strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	return
}

func (k *kcatCompat) createTopic(context.Context, string, int, int) error { return errNoAdmin }

func (k *kcatCompat) group(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, failFast)
	defer cancel()
	_, err := k.run(ctx, "-G", "compat-kcat", "-q", topic)
	if ctx.Err() != nil {
		return nil // still waiting when the bound passed
	}
	return err
}

// pythonCompat is confluent-kafka, librdkafka's Python binding, run by
// testdata/compat.py, one operation a process.
type pythonCompat struct {
	python, bootstrap, version, librdkafka string
	dir                                    string
}

func newPythonCompat(t *testing.T, python, bootstrap string) *pythonCompat {
	t.Helper()
	p := &pythonCompat{python: python, bootstrap: bootstrap, dir: t.TempDir()}
	var v struct{ ConfluentKafka, Librdkafka string }
	require.NoError(t, p.run(t.Context(), &v, "version"))
	p.version, p.librdkafka = v.ConfluentKafka, v.Librdkafka
	return p
}

func (p *pythonCompat) header() string {
	return fmt.Sprintf("confluent-kafka %s (librdkafka %s)", p.version, p.librdkafka)
}

// run runs compat.py's op with args and decodes its answer into out; an
// answer with an error is returned as one.
func (p *pythonCompat) run(ctx context.Context, out any, op string, args ...string) error {
	cmd := exec.CommandContext(ctx, p.python, append([]string{filepath.Join("testdata", "compat.py"), p.bootstrap, op}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("compat.py %s: %w: %s", op, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var failed struct{ Error *string }
	if err := json.Unmarshal(stdout, &failed); err != nil {
		return fmt.Errorf("compat.py %s printed %q: %w", op, stdout, err)
	}
	if failed.Error != nil {
		return fmt.Errorf("compat.py %s: %s", op, *failed.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(stdout, out)
}

func (p *pythonCompat) produce(ctx context.Context, topic string, partition int32, acks, codec string, idempotent bool, values []string) error {
	path, err := writeValues(p.dir, topic, partition, values)
	if err != nil {
		return err
	}
	idem := "0"
	if idempotent {
		idem = "1"
	}
	return p.run(ctx, nil, "produce", topic, fmt.Sprint(partition), acks, codec, idem, path)
}

func (p *pythonCompat) consume(ctx context.Context, topic string, partition int32, rack string, n int) ([]string, error) {
	var out struct{ Values []string }
	err := p.run(ctx, &out, "consume", topic, fmt.Sprint(partition), rack, fmt.Sprint(n))
	return out.Values, err
}

func (p *pythonCompat) offsets(ctx context.Context, topic string, partition int32, ts int64) (earliest, latest, byTime int64, err error) {
	var out struct{ Earliest, Latest, ByTime int64 }
	err = p.run(ctx, &out, "offsets", topic, fmt.Sprint(partition), fmt.Sprint(ts))
	return out.Earliest, out.Latest, out.ByTime, err
}

func (p *pythonCompat) createTopic(ctx context.Context, topic string, partitions, rf int) error {
	return p.run(ctx, nil, "create", topic, fmt.Sprint(partitions), fmt.Sprint(rf))
}

func (p *pythonCompat) group(ctx context.Context, topic string) error {
	var out struct {
		Code, Message string
		Seconds       float64
	}
	if err := p.run(ctx, &out, "group", topic, fmt.Sprint(failFast.Seconds())); err != nil {
		return err
	}
	if out.Code == "" {
		return nil
	}
	return fmt.Errorf("%s: %s", out.Code, out.Message)
}
