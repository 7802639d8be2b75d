package capacity

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewClassSetRefuses(t *testing.T) {
	ok := ClassDef{Name: "ok", Rank: 1}
	many := make([]ClassDef, MaxClasses+1)
	for i := range many {
		many[i] = ClassDef{Name: "c" + itoa(i)}
	}
	for _, tc := range []struct {
		name string
		defs []ClassDef
	}{
		{"none", nil},
		{"too many", many},
		{"empty name", []ClassDef{{Name: ""}}},
		{"bad name", []ClassDef{{Name: "tenant a"}}},
		{"duplicate", []ClassDef{ok, ok}},
		{"negative rank", []ClassDef{{Name: "a", Rank: -1}}},
		{"rank over max", []ClassDef{{Name: "a", Rank: MaxRank + 1}}},
		{"negative weight", []ClassDef{{Name: "a", Weight: -1}}},
		{"weight over max", []ClassDef{{Name: "a", Weight: MaxWeight + 1}}},
		{"NaN weight", []ClassDef{{Name: "a", Weight: math.NaN()}}},
		{"weight under min", []ClassDef{{Name: "a", Weight: MinWeight / 10}}},
		{"floor 1", []ClassDef{{Name: "a", Floor: 1}}},
		{"negative floor", []ClassDef{{Name: "a", Floor: -0.1}}},
		{"NaN floor", []ClassDef{{Name: "a", Floor: math.NaN()}}},
		{"negative aging", []ClassDef{{Name: "a", AgingAfter: -time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewClassSet(tc.defs...)
			assert.ErrorIs(t, err, ErrInvalidClasses)
			assert.Nil(t, s)
		})
	}
	s, err := NewClassSet(many[:MaxClasses]...)
	require.NoError(t, err, "MaxClasses classes")
	assert.Equal(t, MaxClasses, s.Len())
}

func TestClassSetNames(t *testing.T) {
	s, err := NewClassSet(ClassDef{Name: "batch"}, ClassDef{Name: "chat", Rank: 3, Weight: 2})
	require.NoError(t, err)
	c, ok := s.Lookup("chat")
	require.True(t, ok)
	assert.Equal(t, Class(1), c)
	assert.Equal(t, "chat", s.Name(c))
	d, ok := s.Def(c)
	require.True(t, ok)
	assert.Equal(t, 3, d.Rank)
	_, ok = s.Lookup("Chat")
	assert.False(t, ok, "names are exact")
	_, ok = s.Def(2)
	assert.False(t, ok)
	_, ok = s.Def(-1)
	assert.False(t, ok)
	assert.Equal(t, "class(2)", s.Name(2))
	assert.Equal(t, "class(-1)", s.Name(-1))
	rule, lifted := s.Rule(7, time.Time{}, time.Now())
	assert.Equal(t, ClassRule{Rank: 0, Weight: 1}, rule, "a class the set lacks is admitted at the lowest rank")
	assert.Equal(t, Class(7), lifted)
}

// TestDefaultClassesAreTheBuiltInRule checks that DefaultClasses gives
// every class, at every wait, the rule a request without Rule is admitted
// under.
func TestDefaultClassesAreTheBuiltInRule(t *testing.T) {
	t0 := time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)
	for _, l := range []Limits{
		{},
		{StandardFloor: 0.1, BulkFloor: 0.3},
		{StandardFloor: 0.2, BulkFloor: 0.2, AgingAfter: time.Minute},
		{BulkFloor: 0.5, AgingAfter: 30 * time.Second},
	} {
		s, err := NewClassSet(DefaultClasses(l)...)
		require.NoError(t, err)
		for _, c := range Classes() {
			name, ok := s.Lookup(c.String())
			require.True(t, ok)
			assert.Equal(t, c, name, "the built-in constants name the default classes")
			for _, waited := range []time.Duration{-1, 0, time.Second, 29 * time.Second, 30 * time.Second, time.Minute, 90 * time.Second, 2 * time.Minute, time.Hour} {
				since := t0.Add(-waited)
				if waited < 0 {
					since = time.Time{}
				}
				want := Request{Class: c, Limits: l, Since: since}.EffectiveRule(t0)
				got, lifted := s.Rule(c, since, t0)
				assert.Equal(t, want, got, "%s after %v with %+v", c, waited, l)
				// One class up for each whole AgingAfter waited, up to
				// Interactive.
				wantLifted := c
				if !since.IsZero() && l.AgingAfter > 0 {
					for n := waited / l.AgingAfter; n > 0 && wantLifted != Interactive; n-- {
						wantLifted = map[Class]Class{Bulk: Standard, Standard: Interactive}[wantLifted]
					}
				}
				assert.Equal(t, wantLifted, lifted, "%s after %v", c, waited)
			}
		}
	}
}

func TestClassSetRuleAges(t *testing.T) {
	s, err := NewClassSet(
		ClassDef{Name: "batch", Rank: 0, Weight: 0.5, Floor: 0.4, AgingAfter: time.Minute},
		ClassDef{Name: "normal", Rank: 2, Floor: 0.1, AgingAfter: 2 * time.Minute},
		ClassDef{Name: "normal-b", Rank: 2, Floor: 0.2},
		ClassDef{Name: "urgent", Rank: 5},
		ClassDef{Name: "never", Rank: 1})
	require.NoError(t, err)
	batch, _ := s.Lookup("batch")
	t0 := time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		waited time.Duration
		want   string
		rule   ClassRule
	}{
		{0, "batch", ClassRule{Rank: 0, Floor: 0.4, Weight: 0.5}},
		{59 * time.Second, "batch", ClassRule{Rank: 0, Floor: 0.4, Weight: 0.5}},
		// The next rank above 0 is 1 ("never"), which does not age.
		{time.Minute, "never", ClassRule{Rank: 1, Weight: 0.5}},
		{time.Hour, "never", ClassRule{Rank: 1, Weight: 0.5}},
	} {
		rule, lifted := s.Rule(batch, t0.Add(-tc.waited), t0)
		assert.Equal(t, tc.want, s.Name(lifted), "after %v", tc.waited)
		assert.Equal(t, tc.rule, rule, "after %v: the lifted class's rank and floor, the class's own weight", tc.waited)
	}

	// Without "never", batch climbs to the first class of rank 2, which
	// ages on after its own AgingAfter.
	s, err = NewClassSet(
		ClassDef{Name: "batch", Rank: 0, Floor: 0.4, AgingAfter: time.Minute},
		ClassDef{Name: "normal", Rank: 2, Floor: 0.1, AgingAfter: 2 * time.Minute},
		ClassDef{Name: "normal-b", Rank: 2, Floor: 0.2},
		ClassDef{Name: "urgent", Rank: 5})
	require.NoError(t, err)
	for _, tc := range []struct {
		waited time.Duration
		want   string
		rank   int
		floor  float64
	}{
		{time.Minute, "normal", 2, 0.1},
		{2*time.Minute + 59*time.Second, "normal", 2, 0.1},
		{3 * time.Minute, "urgent", 5, 0},
		{24 * time.Hour, "urgent", 5, 0},
	} {
		rule, lifted := s.Rule(batch, t0.Add(-tc.waited), t0)
		assert.Equal(t, tc.want, s.Name(lifted), "after %v", tc.waited)
		assert.Equal(t, tc.rank, rule.Rank)
		assert.InDelta(t, tc.floor, rule.Floor, 1e-12)
		assert.Equal(t, 0.0, rule.Weight, "batch's weight (zero: 1)")
	}
	rule, _ := s.Rule(batch, time.Time{}, t0)
	assert.Equal(t, 0, rule.Rank, "zero since: the call does not age")
	rule, _ = s.Rule(batch, t0.Add(time.Hour), t0)
	assert.Equal(t, 0, rule.Rank, "a since in the future has not waited")
}

func TestClassRuleValidate(t *testing.T) {
	for _, tc := range []struct {
		r  ClassRule
		ok bool
	}{
		{ClassRule{}, true},
		{ClassRule{Rank: MaxRank, Floor: 0.999, Weight: MaxWeight}, true},
		{ClassRule{Rank: -1}, false},
		{ClassRule{Rank: MaxRank + 1}, false},
		{ClassRule{Floor: 1}, false},
		{ClassRule{Floor: math.Inf(-1)}, false},
		{ClassRule{Weight: math.Inf(1)}, false},
		{ClassRule{Weight: MinWeight}, true},
		{ClassRule{Weight: math.SmallestNonzeroFloat64}, false},
	} {
		err := tc.r.Validate()
		if tc.ok {
			assert.NoError(t, err, "%+v", tc.r)
			continue
		}
		assert.ErrorIs(t, err, ErrInvalidRequest, "%+v", tc.r)
	}
}

func TestValidateFairnessKey(t *testing.T) {
	for _, key := range []string{"", "a", "Team_a-1.eu:prod@x", strings.Repeat("k", MaxFairnessKeyLength)} {
		assert.NoError(t, ValidateFairnessKey(key), "%q", key)
	}
	for _, key := range []string{" ", "a b", "a/b", "{a}", "a\n", "é", strings.Repeat("k", MaxFairnessKeyLength+1)} {
		err := ValidateFairnessKey(key)
		assert.ErrorIs(t, err, ErrInvalidFairness, "%q", key)
	}
}
