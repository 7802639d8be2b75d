package capacity

import (
	"fmt"
	"time"
)

// Fairness places a call among the others of its class that wait: while
// calls of several fairness keys wait on a scope, they are granted in the
// order of weighted fair queuing over the tokens they are charged, so each
// key's share of what the class is granted follows its weight. The state
// (each key's virtual time, its caps' counters) lives in the store, so it
// holds across workers and restarts.
//
// A key that waits for nothing keeps no credit: when it comes back it is
// placed at the scope's current virtual time, ahead of the calls the
// backlogged keys booked far ahead, so it is served at the next capacity
// and then shares by weight. The zero value is the class's shared key, with
// weight 1 and no caps.
type Fairness struct {
	// Key is the fairness key: a tenant, a customer, a workflow type. A
	// name (ValidateFairnessKey), never a secret or prompt text. Empty: the
	// class's shared key.
	Key string
	// Weight is the key's share against the other keys of its class while
	// they wait (a class's weight multiplies it, ClassRule.Weight): from
	// MinWeight to MaxWeight. If zero, 1.
	Weight float64
	// Share, if positive, caps the key at this fraction (0, 1] of every
	// per-minute budget of the scope: the key has its own buckets of that
	// size and rate, and a call they cannot hold waits (DenyKeyCap) without
	// booking, leaving the scope's capacity to the others.
	Share float64
	// TokensPerDay, if positive, caps the tokens the key is charged per
	// day window of the scope (Limits.DayReset): a call that would pass it
	// is refused with DenyKeyQuota until the window ends.
	TokensPerDay int64
}

// ValidateFairnessKey reports whether key can name a fairness key in a store
// (a Redis hash field, a metric label): empty, or 1 to MaxFairnessKeyLength
// ASCII letters, digits and '_', '-', '.', ':', '@'.
func ValidateFairnessKey(key string) error {
	if len(key) > MaxFairnessKeyLength {
		return fmt.Errorf("%w: key is %d bytes; want at most %d", ErrInvalidFairness, len(key), MaxFairnessKeyLength)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' || c == ':' || c == '@'
		if !ok {
			return fmt.Errorf("%w: key has byte %d (0x%02x) outside [A-Za-z0-9_.:@-]", ErrInvalidFairness, i, c)
		}
	}
	return nil
}

// Validate reports whether f can be used.
func (f Fairness) Validate() error {
	if err := ValidateFairnessKey(f.Key); err != nil {
		return err
	}
	if !validWeight(f.Weight) {
		return fmt.Errorf("%w: Weight is %v; want 0 (meaning 1) or from %v to %v", ErrInvalidFairness, f.Weight, MinWeight, MaxWeight)
	}
	if !(f.Share >= 0 && f.Share <= 1) {
		return fmt.Errorf("%w: Share is %v; want 0 (no cap) or in (0, 1]", ErrInvalidFairness, f.Share)
	}
	if f.TokensPerDay < 0 {
		return fmt.Errorf("%w: TokensPerDay is %d; want 0 (no cap) or more", ErrInvalidFairness, f.TokensPerDay)
	}
	return nil
}

// weight is f's weight, 1 if unset.
func (f Fairness) weight() float64 {
	if f.Weight <= 0 {
		return 1
	}
	return f.Weight
}

// validWeight reports whether w is 0 (meaning 1) or from MinWeight to
// MaxWeight.
func validWeight(w float64) bool { return w == 0 || w >= MinWeight && w <= MaxWeight }

// ClassRule is how a store treats the calls of one class: where they rank,
// how much of every budget they leave to higher ranks, and their weight
// against other classes of the same rank.
type ClassRule struct {
	// Rank orders classes: a higher rank is served first and may borrow
	// what lower ranks booked. From 0 to MaxRank.
	Rank int
	// Floor is the fraction [0, 1) of every budget (each bucket, the daily
	// allowance, the in-flight slots) that the class may not consume.
	Floor float64
	// Weight multiplies the weight of the class's fairness keys against
	// the keys of other classes of the same rank: from MinWeight to
	// MaxWeight. If zero, 1.
	Weight float64
}

// Validate reports whether r can be used.
func (r ClassRule) Validate() error {
	if r.Rank < 0 || r.Rank > MaxRank {
		return fmt.Errorf("%w: Rank is %d; want 0 to %d", ErrInvalidRequest, r.Rank, MaxRank)
	}
	if !(r.Floor >= 0 && r.Floor < 1) {
		return fmt.Errorf("%w: Floor is %v; want [0, 1)", ErrInvalidRequest, r.Floor)
	}
	if !validWeight(r.Weight) {
		return fmt.Errorf("%w: Weight is %v; want 0 (meaning 1) or from %v to %v", ErrInvalidRequest, r.Weight, MinWeight, MaxWeight)
	}
	return nil
}

func (r ClassRule) weight() float64 {
	if r.Weight <= 0 {
		return 1
	}
	return r.Weight
}

// EffectiveRule is the class rule a request is admitted under at now:
// Request.Rule if set, else its Class's built-in rule (the built-in ranks,
// the floors of Limits.StandardFloor and BulkFloor, lifted by
// Limits.AgingAfter since Request.Since).
func (r Request) EffectiveRule(now time.Time) ClassRule {
	if r.Rule != nil {
		return *r.Rule
	}
	c := aged(r.Class, r.Since, now, r.Limits.lift)
	return ClassRule{Rank: rank(c), Floor: r.Limits.floor(c), Weight: 1}
}

// FlowWeight is the weight of a request's flow: its class's weight times
// its key's.
func (r Request) FlowWeight(rule ClassRule) float64 { return rule.weight() * r.Fairness.weight() }

// fairCost is what a charge costs in fair queuing: its tokens, or its
// requests on a charge of no tokens.
func fairCost(c Charges) float64 {
	if tok := chargedTokens(c); tok != 0 {
		return tok
	}
	return float64(c[Requests])
}

// chargedTokens is a charge's tokens: its combined tokens (what OpenAI's
// TPM counts), or input plus output where no combined charge is made.
func chargedTokens(c Charges) float64 {
	if c[Tokens] != 0 {
		return float64(c[Tokens])
	}
	return float64(c[InputTokens] + c[OutputTokens])
}

// flowID names a (class, key) flow in a scope's fair-queuing state.
type flowID struct {
	class Class
	key   string
}
