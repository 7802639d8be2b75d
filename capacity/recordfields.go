package capacity

// The fields of each record, in the order they are encoded (recordcodec.go):
// a field added goes last and bumps recordFormat.

func (l *Lease) fields(c fieldCodec) {
	c.str(&l.ID)
	c.str(&l.Call)
	intField(c, &l.Attempt)
	ints(c, l.Charges[:])
	intField(c, &l.Class)
	c.str(&l.Key)
	c.float(&l.Weight)
	c.time(&l.GrantedAt)
	c.time(&l.Expires)
	c.flag(&l.Mark.Valid)
	floats(c, l.Mark.Granted[:])
	floats(c, l.Mark.InFlight[:])
	c.int(&l.Mark.Seq)
}

func (tk *Ticket) fields(c fieldCodec) {
	c.str(&tk.Call)
	ints(c, tk.Charges[:])
	c.time(&tk.At)
	intField(c, &tk.Class)
	c.time(&tk.Expires)
	c.str(&tk.Key)
	intField(c, &tk.Rank)
	c.float(&tk.Floor)
	c.float(&tk.Weight)
	c.float(&tk.Start)
	c.float(&tk.Finish)
	c.time(&tk.told)
}

func (f *failureCount) fields(c fieldCodec) {
	intField(c, &f.count)
	c.time(&f.expires)
}

func (f *flowState) fields(c fieldCodec) {
	intField(c, &f.class)
	c.str(&f.key)
	intField(c, &f.rank)
	c.float(&f.finish)
	c.float(&f.granted)
}

func (id *flowID) fields(c fieldCodec) {
	intField(c, &id.class)
	c.str(&id.key)
}

func (k *keyState) fields(c fieldCodec) {
	c.float(&k.frac)
	floats(c, k.share[:])
	c.time(&k.last)
	c.float(&k.dayUsed)
	c.time(&k.dayEnd)
	c.time(&k.dayStart)
}

func (r *recentRecord) fields(c fieldCodec) {
	c.int(&r.grantedAt)
	c.str(&r.call)
}

func (l *Limits) fields(c fieldCodec) {
	c.int(&l.RequestsPerMinute)
	c.int(&l.InputTokensPerMinute)
	c.int(&l.OutputTokensPerMinute)
	c.int(&l.TokensPerMinute)
	c.int(&l.RequestsPerDay)
	c.int(&l.TokensPerDay)
	c.int(&l.MaxInFlight)
	intField(c, &l.Burst)
	c.int(&l.TokenBurst)
	c.float(&l.SafetyMargin)
	c.location(&l.DayReset.Location)
	intField(c, &l.DayReset.Offset)
	c.float(&l.StandardFloor)
	c.float(&l.BulkFloor)
	intField(c, &l.AgingAfter)
}

func (b *Block) fields(c fieldCodec) {
	intField(c, &b.Reason)
	c.time(&b.Until)
	c.flag(&b.Credential)
	c.str(&b.Detail)
	intField(c, &b.HalfOpen)
	c.flag(&b.Probing)
}

func (s *scopeState) fields(c fieldCodec) {
	s.limits.fields(c)
	ints(c, s.lowered[:])
	floats(c, s.loweredMark[:])
	c.time(&s.loweredUntil)
	for d := range s.budgets {
		c.flag(&s.budgets[d].Limited)
		c.float(&s.budgets[d].Rate)
		c.float(&s.budgets[d].Capacity)
	}
	floats(c, s.admissible[:])
	c.flag(&s.started)
	floats(c, s.level[:])
	floats(c, s.booked[:])
	for r := range s.bookedBy {
		floats(c, s.bookedBy[r][:])
	}
	c.time(&s.last)
	floats(c, s.dayUsed[:])
	c.time(&s.dayEnd)
	floats(c, s.granted[:])
	c.int(&s.grants)
	c.int(&s.inflight)
	c.time(&s.nextExp)
	c.time(&s.lastExp)
	c.time(&s.keysUntil)
	c.time(&s.waitersUntil)
	s.block.fields(c)
	c.float(&s.cut)
	c.flag(&s.retimePending)
	c.flag(&s.windowCurrent)
	s.bookedFlow.fields(c)
	c.flag(&s.flowsMixed)
	c.float(&s.bookedFloor)
}

func (b *scopeBlob) fields(c fieldCodec) {
	b.scopeState.fields(c)
	floats(c, b.virtual[:])
	for r := range b.past {
		n := len(b.past[r])
		countField(c, &n, maxVirtualLog)
		if n != len(b.past[r]) {
			b.past[r] = make([]virtualPoint, n)
		}
		for i := range b.past[r] {
			c.int(&b.past[r][i].t)
			c.float(&b.past[r][i].v)
		}
	}
	ints(c, b.lastServed[:])
	floats(c, b.lastFinish[:])
	intField(c, &b.flowCount)
	intField(c, &b.flowCursor)
	c.flag(&b.keyed)
	c.int(&b.fairStartFrom)
	c.int(&b.fairStartUntil)
	floats(c, b.recentHeld[:])
	c.int(&b.recentCutoff)
	c.flag(&b.liveOn)
	c.int(&b.liveFrom)
}

// maxVirtualLog bounds the points of a rank's virtual log a blob may hold
// (tuning.VirtualLogLength is 16).
const maxVirtualLog = 1024
