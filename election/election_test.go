package election_test

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/election"
)

// in, out, dead and deadOut are replicas that are live and in sync, live
// and out of sync, down though in sync, and down and out of sync.
func in(id int32, end int64) election.Replica {
	return election.Replica{ID: id, Live: true, InSync: true, End: end}
}
func out(id int32, end int64) election.Replica {
	return election.Replica{ID: id, Live: true, InSync: false, End: end}
}
func dead(id int32) election.Replica    { return election.Replica{ID: id, InSync: true, End: 100} }
func deadOut(id int32) election.Replica { return election.Replica{ID: id, End: 100} }

func TestElect(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    election.Partition
		o    election.Options
		want election.Decision
		err  error
	}{
		{
			name: "Kafka's clean election: the first live in-sync replica, at the next epoch",
			p:    election.Partition{Replicas: []election.Replica{dead(1), in(2, 5), in(3, 9)}, Leader: 1, Epoch: 4},
			want: election.Decision{Leader: 2, Epoch: 5, Changed: true},
		},
		{
			name: "a live replica out of sync is passed over for one in sync",
			p:    election.Partition{Replicas: []election.Replica{dead(1), out(2, 50), in(3, 9)}, Leader: 1, Epoch: 4},
			want: election.Decision{Leader: 3, Epoch: 5, Changed: true},
		},
		{
			name: "an excluded broker is passed over though it may lead",
			p:    election.Partition{Replicas: []election.Replica{in(1, 9), in(2, 9), in(3, 9)}, Leader: 1, Epoch: 4},
			o:    election.Options{Exclude: []int32{1, 2}},
			want: election.Decision{Leader: 3, Epoch: 5, Changed: true},
		},
		{
			name: "the current leader, not excluded, is elected again at a new epoch",
			p:    election.Partition{Replicas: []election.Replica{in(1, 9), in(2, 9)}, Leader: 1, Epoch: 4},
			want: election.Decision{Leader: 1, Epoch: 5, Changed: true},
		},
		{
			name: "Longest: the eligible replica whose log ends last",
			p:    election.Partition{Replicas: []election.Replica{dead(1), in(2, 5), in(3, 9), in(4, 7)}, Leader: 1, Epoch: 0},
			o:    election.Options{Longest: true},
			want: election.Decision{Leader: 3, Epoch: 1, Changed: true},
		},
		{
			name: "Longest: ties go to the first in order",
			p:    election.Partition{Replicas: []election.Replica{in(4, 5), in(2, 9), in(3, 9)}, Leader: 1, Epoch: 0},
			o:    election.Options{Longest: true},
			want: election.Decision{Leader: 2, Epoch: 1, Changed: true},
		},
		{
			name: "Longest: the first in order wins a tie with a later one",
			p:    election.Partition{Replicas: []election.Replica{in(3, 9), in(1, 5), in(2, 9)}, Leader: 1, Epoch: 0},
			o:    election.Options{Longest: true},
			want: election.Decision{Leader: 3, Epoch: 1, Changed: true},
		},
		{
			name: "Longest: a longer log out of sync or down does not count",
			p:    election.Partition{Replicas: []election.Replica{dead(1), out(2, 50), in(3, 9), in(4, 7)}, Leader: 1, Epoch: 0},
			o:    election.Options{Longest: true},
			want: election.Decision{Leader: 3, Epoch: 1, Changed: true},
		},
		{
			name: "no live in-sync replica: no leader, at the next epoch",
			p:    election.Partition{Replicas: []election.Replica{dead(1), dead(2), out(3, 9)}, Leader: 1, Epoch: 4},
			want: election.Decision{Leader: election.NoLeader, Epoch: 5, Changed: true},
		},
		{
			name: "no live in-sync replica, and none was leading: nothing changes",
			p:    election.Partition{Replicas: []election.Replica{dead(1), dead(2), out(3, 9)}, Leader: election.NoLeader, Epoch: 5},
			want: election.Decision{Leader: election.NoLeader, Epoch: 5},
		},
		{
			name: "every replica down, unclean allowed: no leader",
			p:    election.Partition{Replicas: []election.Replica{dead(1), deadOut(2)}, Leader: 1, Epoch: 4},
			o:    election.Options{Unclean: true},
			want: election.Decision{Leader: election.NoLeader, Epoch: 5, Changed: true},
		},
		{
			name: "the only live replica lacks the high watermark: no leader",
			p:    election.Partition{Replicas: []election.Replica{dead(1), out(2, 99), deadOut(3)}, Leader: 1, Epoch: 4},
			want: election.Decision{Leader: election.NoLeader, Epoch: 5, Changed: true},
		},
		{
			name: "the only live replica lacks the high watermark, unclean allowed: it leads, uncleanly",
			p:    election.Partition{Replicas: []election.Replica{dead(1), out(2, 99), deadOut(3)}, Leader: 1, Epoch: 4},
			o:    election.Options{Unclean: true},
			want: election.Decision{Leader: 2, Epoch: 5, Changed: true, Unclean: true},
		},
		{
			name: "unclean allowed, but an in-sync replica is live: the election is clean",
			p:    election.Partition{Replicas: []election.Replica{dead(1), out(2, 99), in(3, 9)}, Leader: 1, Epoch: 4},
			o:    election.Options{Unclean: true, Longest: true},
			want: election.Decision{Leader: 3, Epoch: 5, Changed: true},
		},
		{
			name: "unclean: the longest of the live replicas out of sync, none excluded",
			p:    election.Partition{Replicas: []election.Replica{out(1, 99), out(2, 7), out(3, 8)}, Leader: 1, Epoch: 4},
			o:    election.Options{Unclean: true, Longest: true, Exclude: []int32{1}},
			want: election.Decision{Leader: 3, Epoch: 5, Changed: true, Unclean: true},
		},
		{
			name: "a partition's first leader: epoch 0",
			p:    election.Partition{Replicas: []election.Replica{in(1, 0), in(2, 0)}, Leader: election.NoLeader, Epoch: -1},
			want: election.Decision{Leader: 1, Epoch: 0, Changed: true},
		},
		{
			name: "Skip leaves epochs out",
			p:    election.Partition{Replicas: []election.Replica{dead(1), in(2, 5)}, Leader: 1, Epoch: 4},
			o:    election.Options{Skip: 1},
			want: election.Decision{Leader: 2, Epoch: 6, Changed: true},
		},
		{
			name: "the last epoch there is",
			p:    election.Partition{Replicas: []election.Replica{dead(1), in(2, 5)}, Leader: 1, Epoch: math.MaxInt32 - 1},
			want: election.Decision{Leader: 2, Epoch: math.MaxInt32, Changed: true},
		},
		{
			name: "epoch overflow",
			p:    election.Partition{Replicas: []election.Replica{dead(1), in(2, 5)}, Leader: 1, Epoch: math.MaxInt32},
			err:  election.ErrEpochExhausted,
		},
		{
			name: "epoch overflow by skipping",
			p:    election.Partition{Replicas: []election.Replica{dead(1), in(2, 5)}, Leader: 1, Epoch: math.MaxInt32 - 1},
			o:    election.Options{Skip: 1},
			err:  election.ErrEpochExhausted,
		},
		{
			name: "epoch overflow when the leader is lost",
			p:    election.Partition{Replicas: []election.Replica{dead(1), dead(2)}, Leader: 1, Epoch: math.MaxInt32},
			err:  election.ErrEpochExhausted,
		},
		{
			name: "at the last epoch, a partition that stays without a leader needs none",
			p:    election.Partition{Replicas: []election.Replica{dead(1), dead(2)}, Leader: election.NoLeader, Epoch: math.MaxInt32},
			want: election.Decision{Leader: election.NoLeader, Epoch: math.MaxInt32},
		},
		{
			name: "a replica listed twice",
			p:    election.Partition{Replicas: []election.Replica{in(1, 5), in(2, 5), out(1, 5)}, Leader: 1, Epoch: 4},
			err:  election.ErrInvalid,
		},
		{
			name: "a dead replica listed twice",
			p:    election.Partition{Replicas: []election.Replica{dead(2), in(1, 5), dead(2)}, Leader: 1, Epoch: 4},
			err:  election.ErrInvalid,
		},
		{
			name: "an empty replica set",
			p:    election.Partition{Replicas: []election.Replica{}, Leader: 1, Epoch: 4},
			err:  election.ErrInvalid,
		},
		{
			name: "no replica set",
			p:    election.Partition{Leader: election.NoLeader, Epoch: -1},
			err:  election.ErrInvalid,
		},
		{
			name: "a current epoch below -1",
			p:    election.Partition{Replicas: []election.Replica{in(1, 5)}, Leader: 1, Epoch: -2},
			err:  election.ErrInvalid,
		},
		{
			name: "a negative skip",
			p:    election.Partition{Replicas: []election.Replica{in(1, 5)}, Leader: 1, Epoch: 4},
			o:    election.Options{Skip: -1},
			err:  election.ErrInvalid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replicas := slices.Clone(tc.p.Replicas)
			got, err := election.Elect(tc.p, tc.o)
			assert.Equal(t, replicas, tc.p.Replicas, "Elect changed its argument")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestEligible(t *testing.T) {
	ids := func(rs []election.Replica) []int32 {
		var out []int32
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    election.Partition
		o    election.Options
		want []int32
		err  error
	}{
		{
			name: "the live in-sync replicas not excluded, in order",
			p:    election.Partition{Replicas: []election.Replica{in(3, 0), dead(1), out(4, 9), in(2, 0), in(5, 0)}, Leader: 1},
			o:    election.Options{Exclude: []int32{5}},
			want: []int32{3, 2},
		},
		{
			name: "unclean is not needed while an in-sync replica is live",
			p:    election.Partition{Replicas: []election.Replica{out(4, 9), in(2, 0)}, Leader: 1},
			o:    election.Options{Unclean: true},
			want: []int32{2},
		},
		{
			name: "unclean: the live replicas not excluded",
			p:    election.Partition{Replicas: []election.Replica{out(4, 9), dead(2), out(3, 0), out(1, 0)}, Leader: 2},
			o:    election.Options{Unclean: true, Exclude: []int32{1}},
			want: []int32{4, 3},
		},
		{
			name: "none",
			p:    election.Partition{Replicas: []election.Replica{out(4, 9), dead(2)}, Leader: 2},
		},
		{
			name: "a replica listed twice",
			p:    election.Partition{Replicas: []election.Replica{in(4, 9), in(4, 9)}, Leader: 2},
			err:  election.ErrInvalid,
		},
		{
			name: "an empty replica set",
			p:    election.Partition{Leader: 2},
			err:  election.ErrInvalid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := election.Eligible(tc.p, tc.o)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, ids(got))
		})
	}
}

// TestElectChoosesFromEligible checks the contract the simulation relies
// on: a replica of Eligible's put first in the order is the one Elect
// elects, and with Longest it wins every tie.
func TestElectChoosesFromEligible(t *testing.T) {
	p := election.Partition{Replicas: []election.Replica{in(1, 9), out(2, 99), in(3, 5), in(4, 9), dead(5)}, Leader: 1, Epoch: 7}
	cands, err := election.Eligible(p, election.Options{})
	require.NoError(t, err)
	for _, c := range cands {
		for _, longest := range []bool{false, true} {
			q := p
			q.Replicas = append([]election.Replica{c}, slices.DeleteFunc(slices.Clone(p.Replicas), func(r election.Replica) bool { return r.ID == c.ID })...)
			d, err := election.Elect(q, election.Options{Longest: longest})
			require.NoError(t, err)
			want := c.ID
			if longest && c.End < 9 {
				want = 1 // the first of the longest in p's order
			}
			assert.Equal(t, election.Decision{Leader: want, Epoch: 8, Changed: true}, d, "b%d first, longest %v", c.ID, longest)
		}
	}
}
