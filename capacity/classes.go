package capacity

import (
	"fmt"
	"time"
)

// ClassDef defines a class of calls: its name, where it ranks, its weight
// against classes of the same rank, the part of every budget it leaves to
// higher ranks, and when its waiting calls are lifted to the next rank.
type ClassDef struct {
	// Name names the class in headers, metrics and the CLI (ValidateKind:
	// letters, digits, '_', '-').
	Name string
	// Rank orders classes: a higher rank is served first and may borrow
	// what lower ranks booked. From 0 to MaxRank.
	Rank int
	// Weight is the class's share against the other classes of its rank
	// while both wait, in tokens; it multiplies the weights of its
	// fairness keys. From MinWeight to MaxWeight; if zero, 1.
	Weight float64
	// Floor is the fraction [0, 1) of every budget the class may not
	// consume, so higher ranks always find it.
	Floor float64
	// AgingAfter lifts a call that has waited this long (since its first
	// attempt) to the class of the next higher rank (the first defined),
	// whose own AgingAfter then applies. Zero: the class does not age.
	AgingAfter time.Duration
}

// ClassSet is a validated set of class definitions. A class is its index in
// the set (Class), so the built-in constants Standard, Interactive and Bulk
// name the classes of DefaultClasses.
type ClassSet struct {
	defs   []ClassDef
	byName map[string]Class
}

// NewClassSet validates defs: 1 to MaxClasses classes with distinct valid
// names, ranks from 0 to MaxRank, weights 0 or from MinWeight to
// MaxWeight, floors in [0, 1), non-negative aging.
func NewClassSet(defs ...ClassDef) (*ClassSet, error) {
	if len(defs) == 0 || len(defs) > MaxClasses {
		return nil, fmt.Errorf("%w: %d classes; want 1 to %d", ErrInvalidClasses, len(defs), MaxClasses)
	}
	s := &ClassSet{defs: append([]ClassDef(nil), defs...), byName: make(map[string]Class, len(defs))}
	for i, d := range defs {
		if err := ValidateKind(d.Name); err != nil {
			return nil, fmt.Errorf("%w: class %d: name: %v", ErrInvalidClasses, i, err)
		}
		if _, dup := s.byName[d.Name]; dup {
			return nil, fmt.Errorf("%w: class %q defined twice", ErrInvalidClasses, d.Name)
		}
		if err := (ClassRule{Rank: d.Rank, Floor: d.Floor, Weight: d.Weight}).Validate(); err != nil {
			return nil, fmt.Errorf("%w: class %q: %v", ErrInvalidClasses, d.Name, err)
		}
		if d.AgingAfter < 0 {
			return nil, fmt.Errorf("%w: class %q: AgingAfter is %v; want >= 0", ErrInvalidClasses, d.Name, d.AgingAfter)
		}
		s.byName[d.Name] = Class(i)
	}
	return s, nil
}

// DefaultClasses returns the built-in classes with l's floors and aging:
// standard (rank 1, Limits.StandardFloor), interactive (rank 2, no
// floor) and bulk (rank 0, Limits.BulkFloor), each aging after
// Limits.AgingAfter, at indexes Standard, Interactive and Bulk.
func DefaultClasses(l Limits) []ClassDef {
	defs := make([]ClassDef, numClasses)
	for c := range Class(numClasses) {
		defs[c] = ClassDef{Name: c.String(), Rank: rank(c), Weight: 1, Floor: l.floor(c), AgingAfter: l.AgingAfter}
	}
	defs[Interactive].AgingAfter = 0
	return defs
}

// Len returns the number of classes.
func (s *ClassSet) Len() int { return len(s.defs) }

// Def returns the definition of class c; ok is false if s has no class c.
func (s *ClassSet) Def(c Class) (ClassDef, bool) {
	if c < 0 || int(c) >= len(s.defs) {
		return ClassDef{}, false
	}
	return s.defs[c], true
}

// Lookup returns the class named name.
func (s *ClassSet) Lookup(name string) (Class, bool) {
	c, ok := s.byName[name]
	return c, ok
}

// Name returns the name of class c, or "class(N)" if s has none.
func (s *ClassSet) Name(c Class) string {
	if d, ok := s.Def(c); ok {
		return d.Name
	}
	return "class(" + itoa(int(c)) + ")"
}

// Rule returns the rule a call of class c is admitted under after waiting
// since since (zero: it does not age): its class lifted to the next higher
// rank for each AgingAfter waited, and that class's rank and floor, with
// c's weight. It also returns the class it was lifted to.
func (s *ClassSet) Rule(c Class, since, now time.Time) (ClassRule, Class) {
	d, ok := s.Def(c)
	if !ok {
		return ClassRule{Rank: 0, Weight: 1}, c
	}
	weight := d.Weight
	c = aged(c, since, now, s.lift)
	d = s.defs[c]
	return ClassRule{Rank: d.Rank, Floor: d.Floor, Weight: weight}, c
}

// lift is a class set's aging step (see aged): a class is lifted to the
// first class of the lowest rank above its own after its AgingAfter.
func (s *ClassSet) lift(c Class) (next Class, after time.Duration, ok bool) {
	d := s.defs[c]
	next, ok = s.nextRank(d.Rank)
	return next, d.AgingAfter, ok
}

// aged is the one aging rule: class c, waiting since since, is lifted one
// step for each wait the step asks, as lift gives them (the class above c
// and the wait that lifts c to it; ok false, or no wait: c is not lifted).
// A zero since has not waited.
func aged(c Class, since, now time.Time, lift func(Class) (next Class, after time.Duration, ok bool)) Class {
	if since.IsZero() {
		return c
	}
	waited := now.Sub(since)
	for {
		next, after, ok := lift(c)
		if !ok || after <= 0 || waited < after {
			return c
		}
		waited -= after
		c = next
	}
}

// nextRank returns the first defined class of the lowest rank above r.
func (s *ClassSet) nextRank(r int) (Class, bool) {
	best := -1
	for i, d := range s.defs {
		if d.Rank > r && (best < 0 || d.Rank < s.defs[best].Rank) {
			best = i
		}
	}
	return Class(best), best >= 0
}
