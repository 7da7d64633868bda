package readcore

// maxMarks bounds the marks a recIndex keeps: 32 of 16 bytes per
// partition and metadata partition that describes it.
const maxMarks = 32

// recIndex says where in one metadata partition a partition's entries
// are, so that the entries of the offsets from x on can be read again
// from the first record that may hold one, not from the start of the
// log. It keeps at most maxMarks marks, dense for the newest records and
// thinning out with age, so that reading again from an old offset costs
// at most a few times what it must.
type recIndex struct {
	// through: every record below it that is ever learned was noted,
	// or will be, in order; end: the partition's entries in those end
	// below end (LastOffset+1).
	through, end int64
	// marks are in record order; their ends never decrease.
	marks []mark
}

// mark says that the partition's entries in the records below rec end
// below end: none of those records holds an entry for offsets at or
// past end.
type mark struct{ rec, end int64 }

// note records that the record at rec holds an entry of the partition
// ending below end. A record learned again (after a rewind), or out of
// order, raises the marks past it so that each still bounds every
// record below it.
func (x *recIndex) note(rec, end int64) {
	if rec < x.through {
		for i := len(x.marks) - 1; i >= 0 && x.marks[i].rec > rec; i-- {
			x.marks[i].end = max(x.marks[i].end, end)
		}
		x.end = max(x.end, end)
		return
	}
	if end > x.end {
		x.marks = append(x.marks, mark{rec, x.end})
		x.end = end
		if len(x.marks) == maxMarks {
			x.thin()
		}
	}
	x.through = rec + 1
}

// thin drops every other mark of the older half, keeping the oldest: a
// mark dropped only makes a lookup answer an earlier record, never a
// later one.
func (x *recIndex) thin() {
	half := len(x.marks) / 2
	kept := x.marks[:0]
	for i, m := range x.marks {
		if i >= half || i%2 == 0 {
			kept = append(kept, m)
		}
	}
	x.marks = kept
}

// from returns the record to read again from for every entry of the
// partition that holds offsets at or past off, and false if no record
// noted holds one.
func (x *recIndex) from(off int64) (int64, bool) {
	if x.end <= off {
		return 0, false
	}
	// The last mark whose records all end at or below off: the oldest
	// mark ends at or below every offset (it is the partition's first
	// record), unless a late record raised it.
	at := int64(0)
	for _, m := range x.marks {
		if m.end > off {
			break
		}
		at = m.rec
	}
	return at, true
}
