package fencing_test

import (
	"fmt"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

// A follower applied offsets 100–160 from the epoch-5 leader before it
// learned that epoch 6 took over at 151 (docs/design.md, "Failure
// scenarios", scenario 6). It then
// sees the old leader's last upload and the new leader's first two, out of
// order, and decides until nothing changes.
func ExampleDecide() {
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	var (
		local  fencing.Lineage       // epochs of the follower's own log
		leader fencing.LeaderLineage // epochs learned from markers
		leo    int64                 = 161
	)
	_ = local.Assign(5, 100)
	_ = leader.Merge(metadata.EpochStart{Partition: tp, Epoch: 5, StartOffset: 100})

	// The new leader's publication: its lineage, ending with its own start.
	_ = leader.Merge(
		metadata.EpochStart{Partition: tp, Epoch: 5, StartOffset: 100},
		metadata.EpochStart{Partition: tp, Epoch: 6, StartOffset: 151},
	)
	pending := []metadata.Entry{
		{Partition: tp, RecordEpoch: 5, PublisherEpoch: 5, FirstOffset: 151, LastOffset: 200},
		{Partition: tp, RecordEpoch: 6, PublisherEpoch: 6, FirstOffset: 171, LastOffset: 180},
		{Partition: tp, RecordEpoch: 6, PublisherEpoch: 6, FirstOffset: 151, LastOffset: 170},
	}
	for progress := true; progress; {
		progress = false
		var held []metadata.Entry
		for _, e := range pending {
			d := fencing.Decide(leo, &local, &leader, e)
			fmt.Printf("epoch %d, %d-%d: %v\n", e.RecordEpoch, e.FirstOffset, e.LastOffset, d)
			switch d.Action {
			case fencing.Truncate:
				local.TruncateFromEnd(d.TruncateTo) // and truncate the log itself
				leo = d.TruncateTo
				held, progress = append(held, e), true
			case fencing.Apply:
				// Fetch, verify, append the batches in [From, Limit); only
				// then record it.
				_ = local.Assign(e.RecordEpoch, d.From)
				leo = d.Limit
				progress = true
			case fencing.Hold:
				held = append(held, e)
			}
		}
		pending = held
	}
	fmt.Println("log end", leo, "local lineage", &local)
	// Output:
	// epoch 5, 151-200: truncate to 151: diverged
	// epoch 6, 171-180: hold: gap
	// epoch 6, 151-170: apply [151, 171): next
	// epoch 5, 151-200: drop: fenced
	// epoch 6, 171-180: apply [171, 181): next
	// log end 181 local lineage [(5, 100) (6, 151)]
}

// After a fast failover (KIP-279) markers alone mislead: epoch 6 started at
// 150 and wrote one record there, then epoch 7 was elected on a replica that
// still held epoch 5's record at 150. Epoch 7's publication, its lineage,
// overrides the older markers over the offsets it covers, whatever order
// they arrive in.
func ExampleLeaderLineage_Merge() {
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	marker := func(epoch int32, start int64) metadata.EpochStart {
		return metadata.EpochStart{Partition: tp, Epoch: epoch, StartOffset: start}
	}
	var view fencing.LeaderLineage
	_ = view.Merge(marker(5, 100))
	_ = view.Merge(marker(6, 150))
	fmt.Println(view.String())
	_ = view.Merge(marker(5, 100), marker(7, 151)) // epoch 7's publication
	fmt.Println(view.String())
	epoch, publisher, _ := view.At(150)
	fmt.Printf("offset 150: epoch %d, on the word of epoch %d\n", epoch, publisher)
	// Output:
	// [(5, 100) (6, 150)] by 5@100 6@150
	// [(5, 100) (7, 151)] by 7@100
	// offset 150: epoch 5, on the word of epoch 7
}
