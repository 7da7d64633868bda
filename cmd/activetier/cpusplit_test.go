package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// profileOf builds a CPU profile with one sample per entry: its CPU in
// nanoseconds, its activetier label ("" for none) and its stack, leaf
// first. A stack entry may hold several names separated by "|": one
// location with inlined frames, innermost first.
type testSample struct {
	ns    int64
	label string
	stack []string
}

func profileOf(samples []testSample) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	funcs := map[string]*profile.Function{}
	for _, s := range samples {
		smp := &profile.Sample{Value: []int64{1, s.ns}}
		if s.label != "" {
			smp.Label = map[string][]string{cpuLabel: {s.label}}
		}
		for _, frame := range s.stack {
			loc := &profile.Location{ID: uint64(len(p.Location) + 1)}
			for name := range strings.SplitSeq(frame, "|") {
				f := funcs[name]
				if f == nil {
					f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
					funcs[name] = f
					p.Function = append(p.Function, f)
				}
				loc.Line = append(loc.Line, profile.Line{Function: f})
			}
			p.Location = append(p.Location, loc)
			smp.Location = append(smp.Location, loc)
		}
		p.Sample = append(p.Sample, smp)
	}
	return p
}

const (
	fnWalLeader  = modulePath + "/walstore.(*leaderEngine).Run"
	fnWalNodeRun = modulePath + "/walstore.(*Node).Run.func1"
	fnCombiner   = modulePath + "/combiner.(*Encoder).compress"
	fnZstd       = "github.com/klauspost/compress/zstd.(*Encoder).EncodeAll"
	fnLocal      = modulePath + "/memstore.(*LocalLog).Append"
	fnMetaLog    = modulePath + "/memstore.(*Log).Append"
	fnStore      = modulePath + "/memstore.(*Store).Put"
	fnCluster    = modulePath + "/internal/cluster.(*Cluster).Compare"
	fnProducer   = "main.(*producer).one"
	fnMetered    = "main.meteredObjects.Put"
	fnMetadata   = modulePath + "/metadata.EncodeEntry"
)

// Each sample lands in one part, by its stack's innermost known frame and
// its label, a codec frame anywhere winning.
func TestSplitProfile(t *testing.T) {
	type field func(*cpuSplit) float64
	leader := field(func(s *cpuSplit) float64 { return s.LeaderS })
	follower := field(func(s *cpuSplit) float64 { return s.FollowerS })
	reader := field(func(s *cpuSplit) float64 { return s.ReaderS })
	unlabelled := field(func(s *cpuSplit) float64 { return s.EngineUnlabelledS })
	codec := field(func(s *cpuSplit) float64 { return s.CodecS })
	store := field(func(s *cpuSplit) float64 { return s.ObjectStoreS })
	local := field(func(s *cpuSplit) float64 { return s.LocalLogS })
	metaLog := field(func(s *cpuSplit) float64 { return s.MetadataLogS })
	demo := field(func(s *cpuSplit) float64 { return s.DemoS })
	rt := field(func(s *cpuSplit) float64 { return s.RuntimeS })
	all := []field{leader, follower, reader, unlabelled, codec, store, local, metaLog, demo, rt}

	for _, tc := range []struct {
		name      string
		sample    testSample
		want      field
		codecRepl bool
	}{
		{"leader engine", testSample{label: roleLeader, stack: []string{"runtime.memmove", fnWalLeader, fnWalNodeRun}}, leader, false},
		{"follower engine", testSample{label: roleFollower, stack: []string{fnWalLeader}}, follower, false},
		{"reader, runtime frames only", testSample{label: roleReader, stack: []string{"runtime.mallocgc", "runtime.goexit"}}, reader, false},
		{"engine helper below an engine", testSample{label: roleLeader, stack: []string{fnMetadata, fnWalLeader}}, leader, false},
		{"codec on a leader", testSample{label: roleLeader, stack: []string{"runtime.memmove", fnZstd, fnCombiner, fnWalLeader}}, codec, true},
		{"codec inlined into the combiner", testSample{label: roleFollower, stack: []string{fnZstd + "|" + fnCombiner, fnWalLeader}}, codec, true},
		{"codec on the demo's sample", testSample{label: roleDemo, stack: []string{fnZstd, fnProducer}}, codec, false},
		{"codec without a label", testSample{stack: []string{fnZstd}}, codec, false},
		{"local log on a leader", testSample{label: roleLeader, stack: []string{"runtime.memmove", fnLocal, fnWalLeader}}, local, false},
		{"local log from the producer", testSample{label: roleDemo, stack: []string{fnLocal, fnProducer}}, local, false},
		{"object store under the demo's meter", testSample{label: roleLeader, stack: []string{fnStore, fnMetered, fnWalLeader}}, store, false},
		{"the demo's meter itself", testSample{label: roleLeader, stack: []string{"sync/atomic.AddInt64", fnMetered, fnWalLeader}}, demo, false},
		{"metadata log", testSample{label: roleFollower, stack: []string{fnMetaLog, fnWalLeader}}, metaLog, false},
		{"the comparison", testSample{label: roleDemo, stack: []string{"bytes.Equal", fnCluster, "main.simulate"}}, demo, false},
		{"engine code on the demo's goroutine", testSample{label: roleDemo, stack: []string{fnWalLeader, "main.simulate"}}, unlabelled, false},
		{"demo goroutine, runtime frames only", testSample{label: roleDemo, stack: []string{"runtime.selectgo"}}, demo, false},
		{"background GC", testSample{stack: []string{"runtime.gcBgMarkWorker"}}, rt, false},
		{"test binary's main package", testSample{stack: []string{modulePath + "/cmd/activetier.(*producer).one"}}, demo, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.sample.ns = 30_000_000
			s, err := splitProfile(profileOf([]testSample{tc.sample}))
			require.NoError(t, err)
			assert.InDelta(t, 0.03, s.ProfiledS, 1e-12)
			assert.InDelta(t, 0.03, tc.want(&s), 1e-12, "%+v", s)
			var sum float64
			for _, f := range all {
				sum += f(&s)
			}
			assert.InDelta(t, 0.03, sum, 1e-12, "one part only: %+v", s)
			if tc.codecRepl {
				assert.InDelta(t, 0.03, s.CodecReplicationS, 1e-12)
			} else {
				assert.Zero(t, s.CodecReplicationS)
			}
		})
	}
}

// A profile of many samples sums them part by part; the engines' total and
// replication's are the sums they say.
func TestSplitProfileSums(t *testing.T) {
	s, err := splitProfile(profileOf([]testSample{
		{ns: 10e6, label: roleLeader, stack: []string{fnWalLeader}},
		{ns: 20e6, label: roleLeader, stack: []string{fnWalLeader}},
		{ns: 30e6, label: roleFollower, stack: []string{fnWalLeader}},
		{ns: 40e6, label: roleReader, stack: []string{modulePath + "/directread.(*Reader).Poll"}},
		{ns: 50e6, label: roleFollower, stack: []string{fnZstd}},
		{ns: 60e6, label: roleReader, stack: []string{fnZstd}},
		{ns: 70e6, label: roleDemo, stack: []string{fnLocal, fnProducer}},
	}))
	require.NoError(t, err)
	assert.InDelta(t, 0.28, s.ProfiledS, 1e-9)
	assert.InDelta(t, 0.03, s.LeaderS, 1e-9)
	assert.InDelta(t, 0.03, s.FollowerS, 1e-9)
	assert.InDelta(t, 0.04, s.ReaderS, 1e-9)
	assert.InDelta(t, 0.10, s.EnginesS(), 1e-9)
	assert.InDelta(t, 0.11, s.CodecS, 1e-9)
	assert.InDelta(t, 0.05, s.CodecReplicationS, 1e-9)
	assert.InDelta(t, 0.11, s.replicationS(), 1e-9, "leaders, followers and their codec")
	assert.InDelta(t, 0.07, s.LocalLogS, 1e-9)
}

// A profile without CPU time is not split.
func TestSplitProfileNoCPU(t *testing.T) {
	p := profileOf(nil)
	p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}
	_, err := splitProfile(p)
	require.ErrorIs(t, err, errNoCPUSamples)
}

// The floor is measured on the batches given, for each codec; without
// batches it is empty.
func TestMeasureFloor(t *testing.T) {
	gen := newRecordGen(5)
	var batches [][]byte
	for i := range 8 {
		batches = append(batches, bytes.Clone(gen.next(0, int64(i*100), time.Unix(1_700_000_000, 0), 16<<10).Data))
	}
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd, metadata.CodecS2} {
		t.Run(codec.String(), func(t *testing.T) {
			f, err := measureFloor(codec, batches, 3)
			require.NoError(t, err)
			assert.Equal(t, codec.String(), f.Codec)
			var n int64
			for _, b := range batches {
				n += int64(len(b))
			}
			assert.Equal(t, n, f.SampleBytes)
			if codec == metadata.CodecNone {
				assert.Zero(t, f.EncodeSPerGB)
				assert.Zero(t, f.DecodeSPerGB)
			}
			want := (f.EncodeSPerGB + 2*f.DecodeSPerGB + 3*(f.CopySPerGB+f.HashSPerGB)) / 2
			assert.InDelta(t, want, f.SPerReplicatedGB, 1e-9)
		})
	}
	f, err := measureFloor(metadata.CodecZstd, nil, 3)
	require.NoError(t, err)
	assert.Zero(t, f.SampleBytes)
	assert.Zero(t, f.SPerReplicatedGB)
}

// Every demo run splits its CPU: the parts sum to the profiled CPU, which
// is at most the process's over the same window; the floor is measured on
// the run's batches, and the text and HTML reports show both. Not
// parallel: one CPU profile at a time in a process.
func TestDemoCPUSplit(t *testing.T) {
	rep := demoJSON(t, "--duration", "1s", "--partitions", "8", "--rate", "2", "--seed", "3", "--readers", "1")
	require.NotNil(t, rep.CPUSplit, "note: %s", rep.CPUSplitNote)
	s := rep.CPUSplit
	sum := s.EnginesS() + s.CodecS + s.ObjectStoreS + s.LocalLogS + s.MetadataLogS + s.DemoS + s.RuntimeS
	assert.InDelta(t, s.ProfiledS, sum, 1e-9)
	assert.LessOrEqual(t, s.ProfiledS, rep.CPUSeconds)
	assert.LessOrEqual(t, s.CodecReplicationS, s.CodecS)
	require.NotNil(t, rep.CPUFloor)
	assert.Equal(t, "zstd", rep.CPUFloor.Codec)
	assert.Positive(t, rep.CPUFloor.SampleBytes)
	assert.LessOrEqual(t, rep.CPUFloor.SampleBytes, rep.BytesProduced)

	dir := t.TempDir()
	html := filepath.Join(dir, "r.html")
	r := runCmd(t, "", "demo", "--duration", "500ms", "--partitions", "4", "--rate", "1", "--report", html)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "cpu split")
	assert.Contains(t, r.stdout, "cpu floor")
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	assert.Contains(t, string(page), "cpu split")
	assert.Contains(t, string(page), "cpu floor")
}
