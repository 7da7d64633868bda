package faults_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

var (
	errA = errors.New("a")
	errB = errors.New("b")
	get  = faults.Request{Op: faults.OpGetRange, Bucket: "b1", Key: "k"}
	put  = faults.Request{Op: faults.OpPut, Bucket: "b1", Key: "k"}
)

func TestRate(t *testing.T) {
	hits := func(seed uint64) []bool {
		inj := faults.Rate(0.25, seed, faults.Fail(errA))
		out := make([]bool, 2000)
		for i := range out {
			out[i] = inj.Inject(t.Context(), get).Err != nil
		}
		return out
	}
	a := hits(11)
	assert.Equal(t, a, hits(11), "one seed, one sequence")
	assert.NotEqual(t, a, hits(12), "another seed, another")
	n := 0
	for _, h := range a {
		if h {
			n++
		}
	}
	// Binomial(2000, 0.25): mean 500, standard deviation 19.
	assert.InDelta(t, 500, n, 80)
	assert.True(t, faults.Rate(1, 1, faults.Fail(errA)).Inject(t.Context(), get).Err != nil)
	assert.True(t, faults.Rate(0, 1, faults.Fail(errA)).Inject(t.Context(), get).Zero())
}

func TestInvalidArguments(t *testing.T) {
	assert.PanicsWithValue(t, "faults: Rate 1.5 is not a probability in [0, 1]", func() { faults.Rate(1.5, 1, faults.Fail(errA)) })
	assert.PanicsWithValue(t, "faults: Rate -0.1 is not a probability in [0, 1]", func() { faults.Rate(-0.1, 1, faults.Fail(errA)) })
	assert.PanicsWithValue(t, "faults: Delay -1s is negative", func() { faults.Delay(-time.Second) })
}

func TestOnAndOnce(t *testing.T) {
	consulted := 0
	counting := faults.Func(func(context.Context, faults.Request) faults.Effect {
		consulted++
		return faults.Effect{Err: errA}
	})
	once := faults.Once(faults.On(faults.IsOp(faults.OpPut), counting))
	assert.True(t, once.Inject(t.Context(), get).Zero(), "not a PUT")
	assert.Equal(t, 0, consulted, "On does not consult its injector for the others")
	assert.Equal(t, errA, once.Inject(t.Context(), put).Err, "the first PUT")
	assert.True(t, once.Inject(t.Context(), put).Zero(), "once only")
	assert.Equal(t, 1, consulted)
}

func TestAny(t *testing.T) {
	inj := faults.Any(
		faults.Delay(time.Second),
		faults.On(faults.IsOp(faults.OpGetRange), faults.FailAfter(errA)),
		faults.Fail(errB),
		faults.Always(faults.Effect{Delay: time.Millisecond, Corrupt: 9}),
	)
	assert.Equal(t, faults.Effect{Delay: time.Second + time.Millisecond, Err: errA, AfterApply: true, Corrupt: 9}, inj.Inject(t.Context(), get),
		"delays add up, the first error and corruption win")
	assert.Equal(t, faults.Effect{Delay: time.Second + time.Millisecond, Err: errB, Corrupt: 9}, inj.Inject(t.Context(), put))
}

func TestSet(t *testing.T) {
	var s faults.Set
	assert.True(t, s.Inject(t.Context(), get).Zero(), "the zero Set")
	removeA := s.Add(faults.Fail(errA))
	s.Add(faults.Fail(errB))
	assert.Equal(t, errA, s.Inject(t.Context(), get).Err, "the first added wins")
	removeA()
	removeA()
	assert.Equal(t, errB, s.Inject(t.Context(), get).Err, "removed")
	s.Clear()
	assert.True(t, s.Inject(t.Context(), get).Zero(), "cleared")

	// An injector may change the set it is in.
	var remove func()
	remove = s.Add(faults.Func(func(context.Context, faults.Request) faults.Effect {
		remove()
		return faults.Effect{Err: errA}
	}))
	assert.Equal(t, errA, s.Inject(t.Context(), get).Err)
	assert.True(t, s.Inject(t.Context(), get).Zero(), "it removed itself")
}

func TestOutage(t *testing.T) {
	o := faults.NewOutage(storage.ErrUnavailable)
	o.SetDown("b1", true)
	assert.True(t, o.Down("b1"))
	assert.False(t, o.Down("b2"))
	err := o.Inject(t.Context(), get).Err
	require.ErrorIs(t, err, storage.ErrUnavailable)
	assert.ErrorContains(t, err, "b1")
	assert.True(t, o.Inject(t.Context(), faults.Request{Op: faults.OpGetRange, Bucket: "b2"}).Zero())
	del := faults.Request{Op: faults.OpDelete, Bucket: "b2", Refs: []metadata.ObjectRef{{Bucket: "b2", Key: "x"}, {Bucket: "b1", Key: "y"}}}
	assert.ErrorIs(t, o.Inject(t.Context(), del).Err, storage.ErrUnavailable, "a Delete of an object in a bucket that is down")
	assert.True(t, o.Inject(t.Context(), faults.Request{Op: faults.OpLogAppend}).Zero(), "no bucket")
	o.SetDown("b1", false)
	assert.True(t, o.Inject(t.Context(), get).Zero(), "back up")
}

func TestOpString(t *testing.T) {
	seen := map[string]bool{}
	for _, op := range faults.Ops() {
		s := op.String()
		assert.NotContains(t, s, "Op(", "op %d has a name", op)
		assert.False(t, seen[s], "names are distinct: %s", s)
		seen[s] = true
		assert.Contains(t, faults.Request{Op: op}.String(), s)
	}
	assert.Equal(t, "Op(0)", faults.Op(0).String())
}

func TestErrorMessages(t *testing.T) {
	e := faults.Effect{Err: errA}
	assert.EqualError(t, e.Before(get), "faults: GetRange b1/k range [0, +0): injected fault: a")
	assert.NoError(t, e.After(get))
	e.AfterApply = true
	assert.NoError(t, e.Before(get))
	assert.EqualError(t, e.After(put), "faults: Put b1/k (0 bytes): injected fault after it took effect: a")
	assert.NoError(t, faults.Effect{AfterApply: true}.After(put), "no error, no failure")
}

// FuzzCorruptBytes: a corrupting effect changes exactly one byte of any
// non-empty buffer, and none of an empty one or when it is zero.
func FuzzCorruptBytes(f *testing.F) {
	f.Add([]byte("hello"), uint64(1))
	f.Add([]byte{}, uint64(7))
	f.Add([]byte{0}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, c uint64) {
		got := append([]byte(nil), b...)
		faults.Effect{Corrupt: c}.CorruptBytes(got)
		want := 1
		if c == 0 || len(b) == 0 {
			want = 0
		}
		assert.Equal(t, want, diff(b, got))
	})
}

// An Error keeps neither a Put's body nor the caller's slice of refs.
func TestErrorRetainsNothing(t *testing.T) {
	body := []byte("body")
	refs := []metadata.ObjectRef{{Bucket: "b1", Key: "k"}}
	var fe *faults.Error
	require.ErrorAs(t, faults.Effect{Err: errA}.Before(faults.Request{Op: faults.OpPut, Body: body}), &fe)
	assert.Nil(t, fe.Request.Body)
	require.ErrorAs(t, faults.Effect{Err: errA, AfterApply: true}.After(faults.Request{Op: faults.OpDelete, Refs: refs}), &fe)
	refs[0].Key = "changed"
	assert.Equal(t, "k", fe.Request.Refs[0].Key)
}
