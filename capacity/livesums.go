package capacity

import "maps"

// The live sums' shape: a report walks the live leases while at most
// liveFlat are live; past that they are summed by grant number in a tree of
// radix liveRadix, liveLevels levels above the leases. The Redis store keeps
// the same sums in a hash (lua/state.lua, index.liveBefore).
const (
	liveFlat   = 16
	liveRadix  = 16
	liveLevels = 4
)

// liveSpan[l] is how many grant numbers a node of level l sums:
// liveRadix^l.
var liveSpan = func() (span [liveLevels + 1]int64) {
	span[0] = 1
	for l := 1; l <= liveLevels; l++ {
		span[l] = span[l-1] * liveRadix
	}
	return span
}()

// liveNode names node index of level level: the sum of the leases whose
// grant numbers n have n / liveSpan[level] == index.
type liveNode struct {
	level int
	index int64
}

// liveSums is what the live leases hold per bucket, by grant number
// (Mark.Seq), kept while more than liveFlat leases are live, so that what
// those granted before a given one hold (memScope.observe) is read in at
// most liveRadix - 1 nodes per level, and the top level's from from, at or
// below the lowest number live. A node that sums to zero is no entry.
type liveSums struct {
	nodes map[liveNode][numBuckets]float64 // nil: not kept (liveFlat or fewer leases live)
	from  int64
	// changed holds the nodes changed (records.go).
	changed changedKeys[liveNode]
}

// on reports whether the sums are kept.
func (s *liveSums) on() bool { return s.nodes != nil }

// start keeps the sums from now, of leases.
func (s *liveSums) start(leases *leaseSet) {
	s.nodes, s.from = map[liveNode][numBuckets]float64{}, 0
	first := true
	for _, le := range leases.all() {
		s.add(le, 1)
		if first || le.Mark.Seq < s.from {
			s.from, first = le.Mark.Seq, false
		}
	}
}

// stop forgets the sums: no lease is live.
func (s *liveSums) stop() {
	for k := range s.nodes {
		s.changed.note(k)
	}
	s.nodes = nil
}

// add adds lease le's charges, times sign (1: granted, -1: ended), to
// every node above it.
func (s *liveSums) add(le Lease, sign float64) {
	for l := range liveLevels + 1 {
		k := liveNode{l, le.Mark.Seq / liveSpan[l]}
		v, held := s.nodes[k], false
		for d := range numBuckets {
			v[d] += sign * float64(le.Charges[d])
			held = held || v[d] != 0
		}
		if held {
			s.nodes[k] = v
		} else {
			delete(s.nodes, k)
		}
		s.changed.note(k)
	}
}

// before returns what the live leases numbered below n hold, and what
// lease n holds if it is live: from the sums if kept, else from leases.
func (s *liveSums) before(n int64, leases *leaseSet) (earlier, own [numBuckets]float64) {
	if !s.on() {
		for _, le := range leases.all() {
			for d := range numBuckets {
				switch {
				case le.Mark.Seq < n:
					earlier[d] += float64(le.Charges[d])
				case le.Mark.Seq == n:
					own[d] += float64(le.Charges[d])
				}
			}
		}
		return earlier, own
	}
	sum := func(k liveNode) bool {
		v, ok := s.nodes[k]
		for d := range numBuckets {
			earlier[d] += v[d]
		}
		return ok
	}
	// [0, n) is the nodes of each level l below the top from liveRadix *
	// q(l+1) to q(l) - 1, q(l) = n / liveSpan[l], and the top's below
	// q(liveLevels).
	for l := range liveLevels {
		q := n / liveSpan[l]
		for j := q / liveRadix * liveRadix; j < q; j++ {
			sum(liveNode{l, j})
		}
	}
	top := liveSpan[liveLevels]
	leading := true
	for j := s.from / top; j < n/top; j++ {
		if !sum(liveNode{liveLevels, j}) && leading {
			s.from = (j + 1) * top // no lease is live below the next top node
		} else {
			leading = false
		}
	}
	for d := range numBuckets {
		earlier[d] = max(0, earlier[d])
	}
	return earlier, s.nodes[liveNode{0, n}]
}

// clone returns a copy that shares nothing with s.
func (s liveSums) clone() liveSums {
	s.changed = nil
	if s.nodes != nil {
		s.nodes = maps.Clone(s.nodes)
	}
	return s
}
