package costmodel

// Usage is what a measured run did: the counts a demo, a memstore accounting
// or an S3 bill provides. Every field is a total over the run. The zero value
// is a run that did nothing (RF aside).
type Usage struct {
	// Puts and Gets count object store requests: one PUT per combined
	// object, one GET per byte range read.
	Puts int64
	Gets int64
	// BytesUp and BytesDown are the bytes PUT and the bytes returned by the
	// GETs.
	BytesUp   int64
	BytesDown int64
	// MetadataBytes are the metadata log's bytes that crossed an AZ
	// boundary, counted once per crossing: the leader's publish, the log's
	// own replication, and each follower's read. An accounting that only
	// knows the bytes published may multiply them by DefaultMetadataCrossings.
	MetadataBytes int64
	// ControlBytes are the bytes of the follower-to-leader fetches that
	// remain with activetier (end offsets, high watermark), crossing AZs.
	// Broker-to-broker replication sends the same headers with its data, so
	// the model charges them to both paths.
	ControlBytes int64
	// StoredByteSeconds is the integral of bytes held in the object store
	// over the run (bytes × seconds); zero leaves storage out.
	StoredByteSeconds float64
	// ProducedBytes are the bytes the leaders accepted: what broker-to-broker
	// replication would have copied to each follower.
	ProducedBytes int64
	// RF is the replication factor of the partitions produced to: RF-1
	// follower copies, each in another AZ.
	RF int
}

// Validate reports every negative count and an RF below 2, naming each field.
func (u Usage) Validate() error {
	var c checker
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Usage.Puts", u.Puts}, {"Usage.Gets", u.Gets},
		{"Usage.BytesUp", u.BytesUp}, {"Usage.BytesDown", u.BytesDown},
		{"Usage.MetadataBytes", u.MetadataBytes}, {"Usage.ControlBytes", u.ControlBytes},
		{"Usage.ProducedBytes", u.ProducedBytes},
	} {
		if f.v < 0 {
			c.fail(f.name, f.v, "must not be negative")
		}
	}
	c.nonNegative("Usage.StoredByteSeconds", u.StoredByteSeconds)
	checkRF(&c, "Usage.RF", u.RF)
	return c.err()
}

func checkRF(c *checker, field string, rf int) {
	if rf < 2 {
		c.fail(field, rf, "must be at least 2: activetier replaces follower copies, and with RF=1 there are none")
	}
}

// Breakdown is one replication path's cost in US dollars, by what is billed.
// The activetier path fills the object store lines and MetadataUSD; the
// broker-to-broker path fills ReplicationUSD; both carry ControlUSD.
type Breakdown struct {
	PutUSD       float64 // PUT requests
	GetUSD       float64 // range GET requests
	UploadUSD    float64 // per-byte upload fee
	RetrievalUSD float64 // per-byte retrieval fee
	StorageUSD   float64 // bytes held in the object store over time
	// MetadataUSD is the metadata log's traffic across AZs. The log (a
	// Kafka topic, say) lives on brokers in every AZ, so publishing an entry,
	// replicating it and reading it cross AZ boundaries at EC2's cross-AZ
	// price: it is the part of replication that still travels broker to
	// broker.
	MetadataUSD float64
	// ControlUSD is the follower-to-leader fetch traffic (offsets, high
	// watermark), the same on both paths.
	ControlUSD float64
	// ReplicationUSD is the leader sending each produced byte to RF-1
	// followers in other AZs.
	ReplicationUSD float64
	// TotalUSD is the sum of the lines above.
	TotalUSD float64
}

// WriteUSD is the leader's side of the object store bill: PUTs and upload.
func (b Breakdown) WriteUSD() float64 { return b.PutUSD + b.UploadUSD }

// ReadUSD is the followers' side of the object store bill: GETs and
// retrieval.
func (b Breakdown) ReadUSD() float64 { return b.GetUSD + b.RetrievalUSD }

func (b Breakdown) withTotal() Breakdown {
	b.TotalUSD = b.PutUSD + b.GetUSD + b.UploadUSD + b.RetrievalUSD + b.StorageUSD +
		b.MetadataUSD + b.ControlUSD + b.ReplicationUSD
	return b
}

// Scale multiplies every line by f, e.g. to turn a per-second cost into a
// per-month one.
func (b Breakdown) Scale(f float64) Breakdown {
	return Breakdown{
		PutUSD: b.PutUSD * f, GetUSD: b.GetUSD * f, UploadUSD: b.UploadUSD * f,
		RetrievalUSD: b.RetrievalUSD * f, StorageUSD: b.StorageUSD * f,
		MetadataUSD: b.MetadataUSD * f, ControlUSD: b.ControlUSD * f,
		ReplicationUSD: b.ReplicationUSD * f,
	}.withTotal()
}

// Comparison puts the two replication paths side by side.
type Comparison struct {
	ActiveTier     Breakdown
	BrokerToBroker Breakdown
	// SavingsUSD is BrokerToBroker.TotalUSD - ActiveTier.TotalUSD: negative
	// when activetier costs more.
	SavingsUSD float64
	// SavingsRatio is SavingsUSD / BrokerToBroker.TotalUSD (0.12 = 12%
	// cheaper; negative when activetier costs more), or 0 when the baseline
	// costs nothing.
	SavingsRatio float64
}

func compare(at, b2b Breakdown) Comparison {
	at, b2b = at.withTotal(), b2b.withTotal()
	c := Comparison{ActiveTier: at, BrokerToBroker: b2b, SavingsUSD: b2b.TotalUSD - at.TotalUSD}
	if b2b.TotalUSD > 0 {
		c.SavingsRatio = c.SavingsUSD / b2b.TotalUSD
	}
	return c
}

// Scale multiplies both paths by f; the ratio does not change.
func (c Comparison) Scale(f float64) Comparison {
	return compare(c.ActiveTier.Scale(f), c.BrokerToBroker.Scale(f))
}

// RunCost prices a measured run and the broker-to-broker replication of the
// same produced bytes at the same RF:
//
//	activetier     = Puts·PUT + Gets·GET + BytesUp·upload + BytesDown·retrieval
//	               + StoredByteSeconds·storage + (MetadataBytes + ControlBytes)·crossAZ
//	broker-to-broker = ProducedBytes·(RF-1)·crossAZ + ControlBytes·crossAZ
//
// where crossAZ = (CrossAZOutPerGB + CrossAZInPerGB) / BytesPerGB.
func RunCost(p Prices, u Usage) (Comparison, error) {
	if err := p.Validate(); err != nil {
		return Comparison{}, err
	}
	if err := u.Validate(); err != nil {
		return Comparison{}, err
	}
	control := float64(u.ControlBytes) * p.crossAZPerByte()
	at := storeLines(p, u.Puts, u.Gets, u.BytesUp, u.BytesDown)
	at.StorageUSD = u.StoredByteSeconds * p.storagePerByteSec()
	at.MetadataUSD = float64(u.MetadataBytes) * p.crossAZPerByte()
	at.ControlUSD = control
	b2b := Breakdown{
		ReplicationUSD: float64(u.ProducedBytes) * float64(u.RF-1) * p.crossAZPerByte(),
		ControlUSD:     control,
	}
	return compare(at, b2b), nil
}

// HedgeCost prices the requests hedging added: puts PUTs and gets GETs
// sent again while the first was slow, moving bytesUp and bytesDown (at
// most: a request that lost is cancelled, often before its body moved).
// A run's Usage already counts them, as a bill does; this is their share,
// for a report to show. Only the object store lines are filled.
func HedgeCost(p Prices, puts, gets, bytesUp, bytesDown int64) (Breakdown, error) {
	if err := p.Validate(); err != nil {
		return Breakdown{}, err
	}
	if err := (Usage{Puts: puts, Gets: gets, BytesUp: bytesUp, BytesDown: bytesDown, RF: 2}).Validate(); err != nil {
		return Breakdown{}, err
	}
	return storeLines(p, puts, gets, bytesUp, bytesDown).withTotal(), nil
}

// storeLines is the object store's requests and bytes under p.
func storeLines(p Prices, puts, gets, bytesUp, bytesDown int64) Breakdown {
	return Breakdown{
		PutUSD:       float64(puts) * p.perPut(),
		GetUSD:       float64(gets) * p.perGet(),
		UploadUSD:    float64(bytesUp) * p.uploadPerByte(),
		RetrievalUSD: float64(bytesDown) * p.retrievalPerByte(),
	}
}
