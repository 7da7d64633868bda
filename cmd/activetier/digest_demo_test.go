package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run without faults checks digests, on followers and direct readers,
// and finds none that differ: the verdict is consistent.
func TestDemoDigestsChecked(t *testing.T) {
	rep := demoJSON(t, "--duration", "1500ms", "--partitions", "6", "--rate", "1", "--readers", "1", "--seed", "5")
	assert.True(t, rep.Consistent)
	assert.Positive(t, rep.Digests.Checks, "no digest checked")
	assert.Zero(t, rep.Digests.Mismatches)
	assert.Empty(t, rep.Digests.MismatchList)
	assert.Nil(t, rep.Digests.Corrupted)
	require.NotNil(t, rep.Readers)
	require.Len(t, rep.Readers.Readers, 1)
	assert.Positive(t, rep.Readers.Readers[0].DigestChecks, "the direct reader checked no digest")
	assert.Zero(t, rep.Readers.Readers[0].DigestMismatches)
}

// With --corrupt-follower a follower's log returns a changed byte in the
// last batch it holds of a partition; restarted from it, the follower
// reads it back and reports exactly that mismatch (partition, a range
// holding the batch, "reread"), listed on its own, and the run ends
// inconsistent, exiting 1, because of it.
func TestDemoCorruptFollower(t *testing.T) {
	args := []string{"demo", "--duration", "1500ms", "--partitions", "6", "--rate", "1", "--seed", "5", "--corrupt-follower"}
	r := runCmd(t, "", append(args, "--json")...)
	require.Equal(t, exitFailure, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "1 replica digest differed from the leaders' published ones")

	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw), r.stdout)
	assert.Equal(t, false, raw["consistent"])
	digests, ok := raw["digests"].(map[string]any)
	require.True(t, ok, "no digests object: %v", raw["digests"])
	for _, k := range []string{"checks", "mismatches", "taken", "mismatch_list", "corrupted"} {
		assert.Contains(t, digests, k)
	}

	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	c := rep.Digests.Corrupted
	require.NotNil(t, c)
	assert.True(t, c.Detected)
	assert.False(t, rep.Consistent)
	assert.Equal(t, uint64(1), rep.Digests.Mismatches)
	require.Len(t, rep.Digests.MismatchList, 1)
	m := rep.Digests.MismatchList[0]
	assert.Equal(t, c.Partition, m.Partition)
	assert.Equal(t, "reread", m.What)
	assert.Equal(t, fmt.Sprintf("broker %d", c.Broker), m.Replica)
	assert.LessOrEqual(t, m.From, c.FirstOffset)
	assert.Equal(t, c.LastOffset+1, m.To)
	// The log comparison finds the changed batch too, but it is not what
	// made the verdict: the digest mismatch is listed by itself.
	assert.False(t, rep.FollowersConsistent)

	// The text run is another run: which follower and batch it changes
	// depend on timing, so its line is matched by form.
	text := runCmd(t, "", args...)
	require.Equal(t, exitFailure, text.code, "stderr: %s", text.stderr)
	assert.Regexp(t, `(?m)^digests\s+NO: 1 digest differed`, text.stdout)
	assert.Regexp(t, `(?m)^\s+broker \d+: topic\d+-\d+ offsets \d+-\d+ \(reread\) differ from epoch \d+'s leader, broker \d+$`, text.stdout,
		"the mismatch is not listed")
}
