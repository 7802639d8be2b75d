package capacity

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestLiveSumsMatchTheLeases: what liveSums says the leases numbered below n
// hold, and lease n, is what walking the leases says, through grants (with
// numbers that jump past each level's boundary), ends in any order, and
// queries anywhere, the top level's start moving as its first nodes empty;
// and no node that sums to zero is kept.
func TestLiveSumsMatchTheLeases(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		leases := newLeaseSet()
		var sums liveSums
		var next int64 = 1
		var live []string
		walk := func(n int64) (earlier, own [numBuckets]float64) {
			var flat liveSums
			return flat.before(n, &leases)
		}
		for i := range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 5 || len(live) == 0: // grant
				if !sums.on() && leases.len() >= liveFlat {
					sums.start(&leases)
				}
				next += rapid.SampledFrom([]int64{0, 0, 0, 1, 14, 250, 4090, 65530}).Draw(t, "jump")
				le := Lease{Call: fmt.Sprint("c", i), Mark: Mark{Seq: next}}
				next++
				for d := range numBuckets {
					le.Charges[d] = rapid.Int64Range(0, 3).Draw(t, "charge")
				}
				if sums.on() {
					sums.add(le, 1)
				}
				leases.put(le.Call, le)
				live = append(live, le.Call)
			case op < 8: // end
				k := rapid.IntRange(0, len(live)-1).Draw(t, "ended")
				le, _ := leases.get(live[k])
				leases.del(le.Call)
				live = append(live[:k], live[k+1:]...)
				switch {
				case leases.len() == 0:
					sums.stop()
				case sums.on():
					sums.add(le, -1)
				}
			default: // query
				n := rapid.Int64Range(0, next).Draw(t, "n")
				wantEarlier, wantOwn := walk(n)
				earlier, own := sums.before(n, &leases)
				require.Equal(t, wantEarlier, earlier, "before %d", n)
				require.Equal(t, wantOwn, own, "lease %d", n)
			}
			for k, v := range sums.nodes {
				require.NotEqual(t, [numBuckets]float64{}, v, "node %+v sums to zero: it is no entry", k)
			}
		}
	})
}
