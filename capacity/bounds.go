package capacity

import "time"

// Defaults: what a zero Limits.Burst, Limits.SafetyMargin and Request.TTL
// mean.
const (
	// DefaultBurst is the default Limits.Burst: the largest amount of a per-minute
	// budget that may be spent at once, expressed as time at the full rate.
	//
	// Providers enforce per-minute limits at sub-minute granularity (OpenAI: "60
	// requests/minute may be enforced as 1 request/second"; Anthropic: token
	// bucket, "capacity is continuously replenished up to your maximum limit" and
	// short bursts can exceed it), so a whole minute's worth at once draws 429s.
	// Five seconds of rate smooths bursts while keeping a small backlog ready.
	DefaultBurst = 5 * time.Second

	// DefaultSafetyMargin is the default Limits.SafetyMargin: 95% of each limit is
	// used, leaving room for traffic tollgate does not see, header skew, and the
	// refill a provider's bucket at rest does not give while a call granted from
	// it is on its way (tollgate's bucket refills from the grant, the provider's
	// from the arrival).
	DefaultSafetyMargin = 0.95

	// DefaultLeaseTTL is the lease lifetime when Request.TTL is zero.
	DefaultLeaseTTL = time.Minute
)

// Bounds: the least and the most that Validate accepts in Limits, Request,
// Fairness and class definitions; a value outside them is refused with a
// named error (ErrInvalidLimits, ErrInvalidRequest, ErrInvalidFairness,
// ErrInvalidClasses), never cut silently. A block is the exception: one
// asked to last longer than MaxBlock lasts MaxBlock.
const (
	// MinBurst and MinSafetyMargin are the smallest Limits.Burst and
	// Limits.SafetyMargin that Validate accepts: below them a bucket cannot
	// hold a real call or refills too slowly to ever be waited for.
	MinBurst        = 100 * time.Millisecond
	MinSafetyMargin = 0.01

	// MaxWeight and MinWeight bound the weight of a key or a class. A smaller
	// weight would make a call's virtual finish (its tokens over its weight)
	// infinite, and its rank's virtual time with it.
	MaxWeight = 1e6
	MinWeight = 1 / MaxWeight

	// MaxRank is the highest class rank; ranks run from 0 to MaxRank.
	MaxRank = 7

	// MaxClasses is the most classes a ClassSet holds.
	MaxClasses = 16

	// MaxDemand is the largest value a Demand field may hold: a trillion
	// tokens, beyond any request a provider accepts, and small enough that a
	// profile adding every field of a Demand cannot overflow.
	MaxDemand = 1 << 40

	// MaxFairStart bounds Request.FairStart.
	MaxFairStart = 5 * time.Second

	// MaxFairnessKeyLength is the longest fairness key, in bytes.
	MaxFairnessKeyLength = 100

	// MaxKindLength is the longest kind ValidateKind accepts, in bytes.
	MaxKindLength = 100

	// MaxBlock bounds every block a store keeps: a block asked to last longer
	// lasts MaxBlock (a monthly usage limit is the longest wait a provider
	// states). No single answer can make a scope unusable for longer; an
	// operator lifts a block earlier with Unblock (`tollgate unblock`).
	MaxBlock = 31 * 24 * time.Hour
)
