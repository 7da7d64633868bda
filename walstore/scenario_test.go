package walstore_test

import (
	"testing"

	"github.com/activetier/activetier/internal/harness/clustertest"
)

// The seven scenarios of docs/design.md, "Failure scenarios", over
// memstore; package clustertest holds them so that the s3express and
// kafkalog tests run them too.

func TestScenario1AZLossFollowerCatchesUpFromRepublish(t *testing.T) {
	clustertest.Scenario1AZLoss(t, clustertest.Mem())
}

func TestScenario2NewReplicaWithEmptyCacheBootstrapsFromRepublish(t *testing.T) {
	clustertest.Scenario2NewReplicaAfterAZLoss(t, clustertest.Mem())
}

func TestScenario3ZombieLeaderIsFenced(t *testing.T) {
	clustertest.Scenario3ZombieLeader(t, clustertest.Mem())
}

func TestScenario4RepublishedEntriesArriveAfterNewerEpoch(t *testing.T) {
	clustertest.Scenario4RepublishAfterNewerEpoch(t, clustertest.Mem())
}

func TestScenario5SameOffsetsAnnouncedTwiceAppliedOnce(t *testing.T) {
	clustertest.Scenario5AnnouncedTwice(t, clustertest.Mem())
}

func TestScenario6FollowerTruncatesDivergentTail(t *testing.T) {
	clustertest.Scenario6DivergentTail(t, clustertest.Mem())
}

func TestScenario7CorruptRangeIsNeverAppended(t *testing.T) {
	clustertest.Scenario7CorruptRange(t, clustertest.Mem())
}
