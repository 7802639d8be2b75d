package capacity

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity/learn"
)

var _ Learner = (*MemoryStore)(nil)

// memLearner is what one MemoryStore learned, under one lock: learning
// happens once per settled call, off the admission path.
type memLearner struct {
	mu     sync.Mutex
	scopes map[Scope]*memLearnScope
}

// memLearnScope is one scope's input ratio and its kinds.
type memLearnScope struct {
	ratio   learn.Histogram
	ratioAt time.Time // the last ratio sample
	kinds   map[string]*learn.Learned
}

// learner returns what the store learned.
func (s *MemoryStore) learner() *memLearner { return &s.learned }

// forgotten reports whether something last learned at t is past
// learn.Memory at now.
func forgotten(t, now time.Time) bool { return now.Sub(t) > learn.Memory }

// Learn implements Learner.
func (s *MemoryStore) Learn(ctx context.Context, scope Scope, kind string, smp learn.Sample) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkLearn(scope, kind, smp); err != nil {
		return err
	}
	now := s.clock.Now()
	ml := s.learner()
	ml.mu.Lock()
	defer ml.mu.Unlock()
	sc := ml.scopes[scope]
	if sc == nil {
		sc = &memLearnScope{kinds: map[string]*learn.Learned{}}
		ml.scopes[scope] = sc
	}
	l := sc.kinds[kind]
	if l == nil || forgotten(l.Updated, now) {
		l = &learn.Learned{}
		sc.kinds[kind] = l
	}
	// Validated above: none of these can fail.
	_ = l.Output.Add(float64(smp.OutputTokens))
	_ = l.Input.Add(float64(smp.InputTokens))
	_ = l.MaxTokens.Add(float64(smp.MaxTokens))
	l.Updated = now
	if r, ok := smp.InputRatio(); ok {
		if forgotten(sc.ratioAt, now) {
			sc.ratio = learn.Histogram{}
		}
		_ = sc.ratio.Add(r)
		sc.ratioAt = now
	}
	return nil
}

// Learned implements Learner.
func (s *MemoryStore) Learned(ctx context.Context, scope Scope, kind string) (learn.Learned, error) {
	if err := ctx.Err(); err != nil {
		return learn.Learned{}, err
	}
	if err := scope.Validate(); err != nil {
		return learn.Learned{}, err
	}
	if err := ValidateKind(kind); err != nil {
		return learn.Learned{}, err
	}
	now := s.clock.Now()
	ml := s.learner()
	ml.mu.Lock()
	defer ml.mu.Unlock()
	sc := ml.scopes[scope]
	if sc == nil {
		return learn.Learned{}, nil
	}
	var out learn.Learned
	if l := sc.kinds[kind]; l != nil && !forgotten(l.Updated, now) {
		out = l.Clone()
	}
	if !forgotten(sc.ratioAt, now) {
		out.InputRatio = sc.ratio.Clone()
	}
	return out, nil
}

// LearnedKinds implements Learner.
func (s *MemoryStore) LearnedKinds(ctx context.Context, scope Scope) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	ml := s.learner()
	ml.mu.Lock()
	defer ml.mu.Unlock()
	kinds := []string{}
	if sc := ml.scopes[scope]; sc != nil {
		for k, l := range sc.kinds {
			if !forgotten(l.Updated, now) {
				kinds = append(kinds, k)
			}
		}
	}
	slices.Sort(kinds)
	return kinds, nil
}
