package fencing

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDecideNilLineages(t *testing.T) {
	assert.Equal(t, Decision{Action: Hold, Reason: ReasonNotCovered}, Decide(0, nil, nil, entry(1, 1, 0, 5)))
	assert.Equal(t, Decision{Action: Skip, Reason: ReasonDuplicate}, Decide(10, nil, nil, entry(1, 1, 0, 5)))
	to, ok := Divergence(10, nil, nil)
	assert.False(t, ok)
	assert.Equal(t, int64(10), to)
}

func TestDecisionString(t *testing.T) {
	assert.Equal(t, "apply [121, 151): next", Decision{Action: Apply, From: 121, Limit: 151, Reason: ReasonNext}.String())
	assert.Equal(t, "truncate to 151: diverged", Decision{Action: Truncate, TruncateTo: 151, Reason: ReasonDiverged}.String())
	assert.Equal(t, "hold: gap", Decision{Action: Hold, Reason: ReasonGap}.String())
	assert.Equal(t, "action(9)", Action(9).String())
	assert.Equal(t, "hold", Decision{}.Action.String(), "the zero decision is a hold")
}
