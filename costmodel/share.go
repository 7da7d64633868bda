package costmodel

// Share is part of a run's activetier usage, attributed to one partition or
// topic by a ledger: requests are fractional because one PUT or GET serves
// several partitions and is split between them by bytes. The fields mean
// what Usage's fields of the same names mean; storage is not attributed.
type Share struct {
	Puts, Gets                  float64
	BytesUp, BytesDown          float64
	MetadataBytes, ControlBytes float64
}

// Add returns the sum of s and o.
func (s Share) Add(o Share) Share {
	return Share{
		Puts: s.Puts + o.Puts, Gets: s.Gets + o.Gets,
		BytesUp: s.BytesUp + o.BytesUp, BytesDown: s.BytesDown + o.BytesDown,
		MetadataBytes: s.MetadataBytes + o.MetadataBytes, ControlBytes: s.ControlBytes + o.ControlBytes,
	}
}

// Validate reports a negative or non-finite field.
func (s Share) Validate() error {
	var c checker
	c.nonNegative("Share.Puts", s.Puts)
	c.nonNegative("Share.Gets", s.Gets)
	c.nonNegative("Share.BytesUp", s.BytesUp)
	c.nonNegative("Share.BytesDown", s.BytesDown)
	c.nonNegative("Share.MetadataBytes", s.MetadataBytes)
	c.nonNegative("Share.ControlBytes", s.ControlBytes)
	return c.err()
}

// PriceShare prices a share on the activetier path with the formulas of
// RunCost, so that the shares of a run, priced one by one and added up,
// come to RunCost's ActiveTier total less storage.
func PriceShare(p Prices, s Share) (Breakdown, error) {
	if err := p.Validate(); err != nil {
		return Breakdown{}, err
	}
	if err := s.Validate(); err != nil {
		return Breakdown{}, err
	}
	return Breakdown{
		PutUSD:       s.Puts * p.perPut(),
		GetUSD:       s.Gets * p.perGet(),
		UploadUSD:    s.BytesUp * p.uploadPerByte(),
		RetrievalUSD: s.BytesDown * p.retrievalPerByte(),
		MetadataUSD:  s.MetadataBytes * p.crossAZPerByte(),
		ControlUSD:   s.ControlBytes * p.crossAZPerByte(),
	}.withTotal(), nil
}
