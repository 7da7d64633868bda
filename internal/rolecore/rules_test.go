package rolecore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/rolecore"
	"github.com/activetier/activetier/metadata"
)

var errStale = errors.New("stale")

// fakeCores records the steps a rule takes, and fails the ones told to.
type fakeCores struct {
	steps []string
	fail  map[string]error
	held  bool
}

func (c *fakeCores) step(name string) error {
	if c.held {
		name += " (held)"
	}
	c.steps = append(c.steps, name)
	return c.fail[strings.TrimSuffix(name, " (held)")]
}

func (c *fakeCores) CheckLeader(metadata.TopicPartition, int32, []int32) error {
	return c.step("check")
}

func (c *fakeCores) EndOffset(metadata.TopicPartition) (int64, error) { return 7, c.step("end") }

func (c *fakeCores) Hold(change func() error) error {
	if err := c.step("hold"); err != nil {
		return err
	}
	c.held = true
	defer func() { c.held = false }()
	return change()
}

func (c *fakeCores) Lead(_ metadata.TopicPartition, _ int32, _ []int32, _, leo int64) error {
	return c.step(fmt.Sprintf("lead at %d", leo))
}

func (c *fakeCores) Follow(metadata.TopicPartition, int32, int32) error { return c.step("follow") }
func (c *fakeCores) Unfollow(metadata.TopicPartition)                   { _ = c.step("unfollow") }
func (c *fakeCores) Resign(metadata.TopicPartition)                     { _ = c.step("resign") }

var tp = metadata.TopicPartition{Topic: "t", Partition: 0}

// TestRules checks each rule's steps, in order, and that a step that
// fails stops the rule with the role in effect left as it was: nothing
// that cannot be undone is done before the last step that can fail.
func TestRules(t *testing.T) {
	rules := rolecore.Rules{BrokerID: 1, StaleEpoch: errStale}
	following := rolecore.RoleState{Role: rolecore.Following, Epoch: 3, Leader: 2}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		rules rolecore.Rules
		in    rolecore.RoleState
		fail  string
		run   func(rolecore.Rules, rolecore.Cores, rolecore.RoleState) (rolecore.RoleState, error)
		out   rolecore.RoleState
		steps []string
	}{
		{name: "lead", in: following, run: lead(4),
			out:   rolecore.RoleState{Role: rolecore.Leading, Epoch: 4, Leader: 1},
			steps: []string{"check", "end", "hold", "lead at 7 (held)", "unfollow (held)"}},
		{name: "lead at a stale epoch", in: following, run: lead(3), steps: nil},
		{name: "lead refused by the core", in: following, fail: "check", run: lead(4), steps: []string{"check"}},
		{name: "lead with a failing log", in: following, fail: "end", run: lead(4), steps: []string{"check", "end"}},
		{name: "lead giving up on the cores", in: following, fail: "hold", run: lead(4), steps: []string{"check", "end", "hold"}},
		{name: "lead refused when it begins", in: following, fail: "lead at 7", run: lead(4),
			steps: []string{"check", "end", "hold", "lead at 7 (held)"}},
		{name: "lead weakened to unfollow first", rules: rolecore.Rules{Weaken: rolecore.Weakening{UnfollowFirst: true}},
			in: following, fail: "check", run: lead(4), steps: []string{"hold", "unfollow (held)", "check"}},
		{name: "lead weakened to any epoch", rules: rolecore.Rules{BrokerID: 1, Weaken: rolecore.Weakening{AnyEpoch: true}},
			in: following, run: lead(3), out: rolecore.RoleState{Role: rolecore.Leading, Epoch: 3, Leader: 1},
			steps: []string{"check", "end", "hold", "lead at 7 (held)", "unfollow (held)"}},
		{name: "lead at an epoch below the one led", in: rolecore.RoleState{Role: rolecore.Leading, Epoch: 5, Leader: 1}, run: lead(4), steps: nil},
		{name: "follow at an epoch below the one led", in: rolecore.RoleState{Role: rolecore.Leading, Epoch: 6, Leader: 1}, run: follow, steps: nil},
		{name: "follow at an epoch below the one followed", in: rolecore.RoleState{Role: rolecore.Following, Epoch: 6, Leader: 2}, run: follow, steps: nil},
		{name: "follow at the epoch led", in: rolecore.RoleState{Role: rolecore.Leading, Epoch: 5, Leader: 1}, run: follow,
			out:   rolecore.RoleState{Role: rolecore.Following, Epoch: 5, Leader: 2},
			steps: []string{"hold", "follow (held)", "resign (held)"}},
		{name: "follow", in: rolecore.None, run: follow,
			out:   rolecore.RoleState{Role: rolecore.Following, Epoch: 5, Leader: 2},
			steps: []string{"hold", "follow (held)", "resign (held)"}},
		{name: "follow refused", in: rolecore.None, fail: "follow", run: follow, steps: []string{"hold", "follow (held)"}},
		{name: "follow giving up", in: rolecore.None, fail: "hold", run: follow, steps: []string{"hold"}},
		{name: "follow weakened to resign first", rules: rolecore.Rules{Weaken: rolecore.Weakening{ResignFirst: true}},
			in: rolecore.None, fail: "hold", run: follow, steps: []string{"resign", "hold"}},
		{name: "stop", in: following, run: stop(tp), out: rolecore.None,
			steps: []string{"hold", "unfollow (held)", "resign (held)"}},
		{name: "stop giving up", in: following, fail: "hold", run: stop(tp), steps: []string{"hold"}},
		{name: "stop an invalid partition", in: following, run: stop(metadata.TopicPartition{Topic: "", Partition: 0}), steps: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rules
			if tc.rules != (rolecore.Rules{}) {
				r = tc.rules
			}
			c := &fakeCores{}
			if tc.fail != "" {
				c.fail = map[string]error{tc.fail: boom}
			}
			out, err := tc.run(r, c, tc.in)
			assert.Equal(t, tc.steps, c.steps)
			if tc.out == (rolecore.RoleState{}) {
				require.Error(t, err)
				assert.Equal(t, tc.in, out, "a refused transition returns the role in effect")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.out, out)
		})
	}
}

// TestStaleEpoch checks that a stale BecomeLeader wraps the driver's
// sentinel and names the role it is not above.
func TestStaleEpoch(t *testing.T) {
	in := rolecore.RoleState{Role: rolecore.Following, Epoch: 3, Leader: 2}
	_, err := rolecore.Rules{BrokerID: 1, StaleEpoch: errStale}.BecomeLeader(&fakeCores{}, in, tp, 3, nil, -1)
	require.ErrorIs(t, err, errStale)
	assert.EqualError(t, err, "stale: epoch 3 is not above epoch 3, which broker 2 leads")
}

// TestRoles checks that NoRole is absent from Roles and what Of says of
// an absent partition.
func TestRoles(t *testing.T) {
	r := make(rolecore.Roles)
	assert.Equal(t, rolecore.None, r.Of(tp))
	lead := rolecore.RoleState{Role: rolecore.Leading, Epoch: 1, Leader: 1}
	r.Set(tp, lead)
	assert.Equal(t, lead, r.Of(tp))
	r.Set(tp, rolecore.None)
	assert.Empty(t, r)
	assert.Equal(t, "leading at epoch 1", lead.String())
	assert.Equal(t, "following broker 2 at epoch 3", rolecore.RoleState{Role: rolecore.Following, Epoch: 3, Leader: 2}.String())
	assert.Equal(t, "neither leading nor following", rolecore.None.String())
	assert.Equal(t, []string{"none", "leading", "following"}, []string{rolecore.NoRole.String(), rolecore.Leading.String(), rolecore.Following.String()})
}

func lead(epoch int32) func(rolecore.Rules, rolecore.Cores, rolecore.RoleState) (rolecore.RoleState, error) {
	return func(r rolecore.Rules, c rolecore.Cores, in rolecore.RoleState) (rolecore.RoleState, error) {
		return r.BecomeLeader(c, in, tp, epoch, []int32{2}, -1)
	}
}

func follow(r rolecore.Rules, c rolecore.Cores, in rolecore.RoleState) (rolecore.RoleState, error) {
	return r.BecomeFollower(c, in, tp, 5, 2)
}

func stop(p metadata.TopicPartition) func(rolecore.Rules, rolecore.Cores, rolecore.RoleState) (rolecore.RoleState, error) {
	return func(r rolecore.Rules, c rolecore.Cores, in rolecore.RoleState) (rolecore.RoleState, error) {
		return r.StopReplica(c, in, p)
	}
}
