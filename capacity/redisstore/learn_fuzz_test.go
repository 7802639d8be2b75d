package redisstore

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// hashText reads "field=value" lines as a hash (HGETALL reply).
func hashText(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if f, v, ok := strings.Cut(line, "="); ok {
			m[f] = v
		}
	}
	return m
}

// FuzzParseLearned checks that no stored hash makes parseLearned panic and
// that whatever it accepts is a histogram the gate can use: finite,
// non-negative counts, sums and quantiles. Seeds: testdata/learned, a
// kind's hash and its scope's ratio hash apart by a "---" line.
func FuzzParseLearned(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "learned", "*.txt"))
	if len(files) == 0 {
		f.Fatal("no seeds in testdata/learned")
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		kind, ratio, _ := strings.Cut(string(b), "---\n")
		f.Add(kind, ratio)
	}
	now := time.UnixMicro(1_760_000_000_000_000)
	f.Fuzz(func(t *testing.T, kind, ratio string) {
		l, err := parseLearned(hashText(kind), hashText(ratio), now)
		if err != nil {
			return
		}
		for name, h := range map[string]learn.Histogram{"out": l.Output, "in": l.Input, "max": l.MaxTokens, "ratio": l.InputRatio} {
			if !finite(h.Count()) || !finite(h.Sum()) {
				t.Fatalf("%s: count %v, sum %v", name, h.Count(), h.Sum())
			}
			var n float64
			for _, b := range h.Buckets() {
				if b.Index < learn.MinBucket || b.Index > learn.MaxBucket || !finite(b.Count) {
					t.Fatalf("%s: bucket %+v", name, b)
				}
				n += b.Count
			}
			if math.Abs(n-h.Count()) > 1e-9*math.Max(1, n) {
				t.Fatalf("%s: count %v, buckets hold %v", name, h.Count(), n)
			}
			for _, q := range []float64{0, 0.5, 0.95, 0.999, 1} {
				v, ok := h.Quantile(q)
				if ok != (h.Count() > 0) || math.IsNaN(v) || v < 0 {
					t.Fatalf("%s: quantile %v = %v, %v (count %v)", name, q, v, ok, h.Count())
				}
			}
		}
		if l.Calls() > 0 && l.Updated.IsZero() {
			t.Fatalf("calls without a time")
		}
	})
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 }
