package capacity

import (
	"context"
	"time"
)

// Store holds the shared budgets of quota scopes and decides admission. Every
// method is atomic with respect to the others on the same scope, so any number
// of goroutines (and, for a shared store, processes) may call it at once.
//
// A Store knows nothing of providers' accounting: callers turn demands into
// Charges with a Profile. The limits of a scope travel with each Reserve; the
// store keeps the latest, lowered by what providers report through Observe.
type Store interface {
	// Reserve asks for req.Charges on req.Scope, all-or-nothing over every
	// dimension. A grant is a Lease. A denial says which dimension binds and
	// when the demand would fit, and with req.Book set it books that future
	// capacity as a ticket: the same Call presenting itself at RetryAt is
	// granted without competing again. Reserving the same (Call, Attempt)
	// twice returns the same lease and charges once; a higher Attempt of the
	// same Call releases the earlier attempt's lease (its tokens stay spent).
	// A demand no configured limit can ever admit returns a
	// *DemandTooLargeError and is never queued.
	Reserve(ctx context.Context, req Request) (Reservation, error)
	// Settle ends a lease with its final charges (see Profile.Settle): the
	// difference from the reservation is refunded (bounded by capacity) or
	// becomes debt; the in-flight slot is freed. Settling a lease that
	// lapsed (it expired, or a later attempt superseded it) applies only the
	// debt, once, within LapsedLeaseMemory of the lapse. A lease settles
	// once: settling or releasing it again, or settling a lease the store
	// never granted, applies nothing. Final charges below zero count as
	// zero, and the debt in a dimension is at most its whole limit (no call
	// uses more).
	Settle(ctx context.Context, lease Lease, final Charges) error
	// Release ends a lease whose call never reached the provider: every
	// charge is refunded and the slot freed. Releasing an unknown lease, or a
	// ticket before its time, is a no-op or a refund respectively.
	Release(ctx context.Context, lease Lease) error
	// Renew extends a live lease to now + ttl. It returns ErrLeaseNotFound if
	// the lease expired and was reclaimed.
	Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)
	// Observe corrects the scope's budget from what the provider reported.
	// The level of each reported dimension becomes at most the reported
	// remaining minus what was granted after obs.Mark; a reported limit below
	// the configured one lowers it, to MinReportedFraction of it at the
	// least, until LoweredLimitMemory after the last report of one. A
	// reported limit never makes a call inadmissible (it only waits), and a
	// reset value never changes a rate.
	Observe(ctx context.Context, scope Scope, obs Observation) error
	// Block makes the scope (or, with b.Credential, every scope on its
	// credential) unusable until b.Until, measured from the caller's clock:
	// a store whose clock differs (Redis TIME) keeps the block for
	// b.Until minus the caller's now, in its own time, and never longer
	// than MaxBlock. A later block never shortens an earlier one. With b.HalfOpen, the block does not simply end at Until:
	// the next call granted after it is a probe (Reservation.Probe) and the
	// block holds everyone else for HalfOpen more, until the probe's caller
	// lifts it with Unblock or blocks again.
	Block(ctx context.Context, scope Scope, b Block) error
	// Unblock lifts the scope's block (or, with credential, the block of its
	// credential).
	Unblock(ctx context.Context, scope Scope, credential bool) error
	// Snapshot returns the scope's levels, leases, tickets and blocks as of
	// now, without changing the scope: metrics and tools may read it freely.
	Snapshot(ctx context.Context, scope Scope) (Snapshot, error)
	// AddFailure records one real failure of call (never a rate-limit wait)
	// and returns the call's failure count, shared by every worker. A count
	// is forgotten ttl after its last failure.
	AddFailure(ctx context.Context, scope Scope, call string, ttl time.Duration) (int, error)
}

// Notifier is implemented by stores that announce freed capacity, so waiters
// wake on a release instead of polling.
type Notifier interface {
	// Released returns a channel that is closed when capacity may have come
	// back on scope — a settle, a release, a reclaimed lease; a store may wake
	// only its longest waiters per release — or when stop is called. Call
	// stop when done waiting.
	Released(scope Scope) (ch <-chan struct{}, stop func())
}

// TicketNotifier is implemented by stores that announce when a booked
// ticket moves well before the time its call was given (a refund, a higher
// report or a released booking brought it forward): by more than
// AnnounceMove and a quarter of the wait left.
type TicketNotifier interface {
	// TicketDue returns a channel that is closed when call's ticket on scope
	// is brought forward so. Call stop when done waiting; the channel may
	// then never close.
	TicketDue(scope Scope, call string) (ch <-chan struct{}, stop func())
}

// Class is the priority class of a call. Interactive work is protected from
// bulk work; class rules are applied by stores that support them.
type Class int8

const (
	// Standard is the default class.
	Standard Class = iota
	// Interactive is a user waiting for the answer.
	Interactive
	// Bulk is batch work that may wait.
	Bulk
)

// numClasses is the number of classes; classIndex maps a class to
// [0, numClasses).
const numClasses = 3

func classIndex(c Class) int {
	if c < 0 || int(c) >= numClasses {
		return int(Standard)
	}
	return int(c)
}

// classes is the one place the class rules are written: each class's name
// and rank. A higher rank is served first and may borrow what lower ranks
// booked. The Redis store's scripts read the same table (generated into
// their constants).
var classes = [numClasses]struct {
	name string
	rank int
}{
	Standard:    {"standard", 1},
	Interactive: {"interactive", 2},
	Bulk:        {"bulk", 0},
}

// rank orders classes: Interactive above Standard above Bulk. A class out
// of range ranks as Standard.
func rank(c Class) int { return classes[classIndex(c)].rank }

// Rank returns the class's rank: a higher rank is served first and may
// borrow what lower ranks booked. A class out of range ranks as Standard.
func (c Class) Rank() int { return rank(c) }

// Classes returns every class in index order.
func Classes() []Class {
	cs := make([]Class, numClasses)
	for i := range cs {
		cs[i] = Class(i)
	}
	return cs
}

func (c Class) String() string {
	if c < 0 || int(c) >= numClasses {
		return "class(" + itoa(int(c)) + ")"
	}
	return classes[c].name
}

// Request is one admission request.
type Request struct {
	// Scope is the quota scope; Limits its budgets.
	Scope  Scope
	Limits Limits
	// Call identifies the call across attempts (for an activity: namespace,
	// workflow id, run id, activity id). Tickets are booked under Call.
	Call string
	// Attempt is the attempt number (1-based). The lease id is Call#Attempt.
	Attempt int
	// Charges is what the call costs in each dimension (Profile.Charges).
	Charges Charges
	// Class and Deadline rank and bound the call. A call whose demand cannot
	// fit before Deadline is refused (DenyDeadline) without being booked.
	// Lower classes may not consume the floors of Limits.StandardFloor and
	// Limits.BulkFloor.
	Class    Class
	Deadline time.Time
	// Since is when the call started waiting (its first attempt), for
	// Limits.AgingAfter; zero: the call does not age.
	Since time.Time
	// Rule, if set, is how the store treats the call's class (a class the
	// caller defined, aged by the caller); Class then only names it. If nil,
	// Class's built-in rule: its rank, the floors of Limits.StandardFloor
	// and BulkFloor, lifted by Limits.AgingAfter.
	Rule *ClassRule
	// Fairness places the call among the waiting calls of its class: its
	// fairness key, the key's weight and caps. The zero value is the
	// class's shared key.
	Fairness Fairness
	// FairStart, for a call with a fairness key, is how long the first
	// keyed calls on a scope at rest gather before any is granted, so that
	// tenants whose calls arrive together share the first burst by weight
	// rather than the first to arrive taking it (at most MaxFairStart).
	// Zero: none; the scope grants at once.
	FairStart time.Duration
	// TTL is the lease lifetime before it must be renewed. If zero,
	// DefaultLeaseTTL.
	TTL time.Duration
	// Book asks the store to book future capacity on denial (a ticket).
	Book bool
}

// LeaseID returns the id of the lease this request asks for.
func (r Request) LeaseID() string { return LeaseID(r.Call, r.Attempt) }

// LeaseID returns the lease id of attempt of call.
func LeaseID(call string, attempt int) string {
	return call + "#" + itoa(attempt)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Mark is a point in a scope's grant history: the cumulative charges granted
// per dimension when a lease was granted, and what the calls then in flight
// held. Observe uses it to discount what was granted after the observed
// request left, and what was sent before it but may have reached the
// provider after it.
type Mark struct {
	Valid   bool
	Granted [NumDimensions]float64
	// InFlight is what the leases live when this one was granted, and
	// granted within ReorderWindow before it, held per dimension (zero in a
	// mark from before scripts 4.4).
	InFlight [NumDimensions]float64
	// Seq is the grant's number in the scope: the first lease it grants
	// is 1, each later one the next. Observe counts the live leases of a
	// lower Seq as granted before the observed call. Zero (a mark from
	// before scripts 6.2) counts every live lease so.
	Seq int64
}

// Lease is a granted reservation, held while the call is in flight.
type Lease struct {
	ID      string
	Call    string
	Attempt int
	Scope   Scope
	Charges Charges
	Class   Class
	// Key and Weight are the call's fairness key and the weight its flow
	// was served at (Request.Fairness, times its class's weight): Settle
	// charges the key what the call actually cost.
	Key    string
	Weight float64
	// GrantedAt and Expires are in the store's clock.
	GrantedAt time.Time
	Expires   time.Time
	// Mark is the scope's grant history at this grant; pass it in
	// Observation.Mark when observing this call's response headers.
	Mark Mark
}

// DenyReason says why a Reserve was denied.
type DenyReason int

const (
	// DenyCapacity: a budget has no room yet; it will at RetryAt.
	DenyCapacity DenyReason = iota + 1
	// DenyBlocked: the scope or its credential is blocked until RetryAt.
	DenyBlocked
	// DenyDeadline: the demand cannot fit before the request's deadline.
	DenyDeadline
	// DenyDailyQuota: a per-day budget is spent until RetryAt (its reset).
	DenyDailyQuota
	// DenyTicket: the call holds a ticket for RetryAt and came early.
	DenyTicket
	// DenyKeyCap: the call's fairness key has used its share of the scope
	// (Fairness.Share) until RetryAt; nothing was booked.
	DenyKeyCap
	// DenyKeyQuota: the call's fairness key has spent its tokens for the
	// day (Fairness.TokensPerDay) until RetryAt, the window's end.
	DenyKeyQuota
)

func (r DenyReason) String() string {
	switch r {
	case DenyCapacity:
		return "capacity"
	case DenyBlocked:
		return "blocked"
	case DenyDeadline:
		return "deadline"
	case DenyDailyQuota:
		return "daily_quota"
	case DenyTicket:
		return "ticket"
	case DenyKeyCap:
		return "key_cap"
	case DenyKeyQuota:
		return "key_quota"
	}
	return "none"
}

// Reservation is the answer to Reserve.
type Reservation struct {
	Granted bool
	Lease   Lease // when Granted
	// When denied:
	Reason  DenyReason
	Binding Dimension // the dimension that binds (DenyCapacity, DenyDailyQuota)
	Block   Block     // the block in force (DenyBlocked)
	// RetryAt is the earliest time the demand fits (or the ticket's time, or
	// the block's end), in the store's clock. Zero if unknown.
	RetryAt time.Time
	// Booked reports that capacity is booked for Call at RetryAt.
	Booked bool
	// Probe reports that this grant is the single probe of a half-open
	// block: its caller must Unblock on success or Block again on failure.
	Probe bool
	// Now is the store's clock at the decision. For a reservation that
	// holds a ticket (HoldsTicket), a store that can tell how long its
	// answer took to come back after it decided (the Redis store's records
	// engine: a write's round trip) gives its clock at the answer instead:
	// RetryAt.Sub(Now) is then the wait left when the caller gets it, which
	// Wait sleeps whole. For other denials Wait takes off the time since it
	// sent the request, so that its next one is decided at RetryAt.
	Now time.Time
}

// BlockReason says why a scope is blocked.
type BlockReason int

const (
	// Cooldown after a provider 429: retry after retry-after.
	Cooldown BlockReason = iota + 1
	// QuotaExhausted until the quota resets.
	QuotaExhausted
	// CredentialDisabled: the provider refused the credential (401).
	CredentialDisabled
	// Overloaded: the provider is overloaded (breaker open).
	Overloaded
)

func (r BlockReason) String() string {
	switch r {
	case Cooldown:
		return "cooldown"
	case QuotaExhausted:
		return "quota_exhausted"
	case CredentialDisabled:
		return "credential_disabled"
	case Overloaded:
		return "overloaded"
	}
	return "none"
}

// Block makes a scope unusable until a time.
type Block struct {
	Reason BlockReason
	Until  time.Time
	// Credential blocks every scope on the same credential (Scope.CredentialKey).
	Credential bool
	// Detail is a short, secret-free note (a quota id, a provider code).
	Detail string
	// HalfOpen, if positive, makes the block end with a single probe: see
	// Store.Block. Stores hold it to MaxBlock at most.
	HalfOpen time.Duration
	// Probing is set by the store while a half-open block's probe is out:
	// the others should wait for it (until Until), not give up.
	Probing bool
}

// Snapshot is a point-in-time view of one scope, for metrics and the CLI.
type Snapshot struct {
	Scope  Scope
	Now    time.Time
	Limits Limits
	// Level per dimension: bucket level (may be negative: debt and tickets),
	// remaining daily allowance, or free in-flight slots.
	Level  [NumDimensions]float64
	Budget [NumDimensions]Budget
	// DayResetAt is when the per-day counters reset next.
	DayResetAt time.Time
	Leases     []Lease
	Tickets    []Ticket
	Blocks     []Block
	// Flows are the scope's fair-queuing flows (class, fairness key) that
	// were served or booked and are not forgotten, by class then key.
	Flows []Flow
	// Keys are the fairness keys with caps and their counters, by key.
	Keys []KeyUsage
}

// Flow is one (class, fairness key) flow of a scope's fair queuing.
type Flow struct {
	Class Class
	Key   string
	// Rank is the rank the flow was last served at.
	Rank int
	// Finish is the virtual time the flow's last booked or granted call
	// finishes at (tokens per unit of weight); Virtual is its rank's
	// current virtual time. A flow ahead of Virtual has been served more
	// than its share lately.
	Finish, Virtual float64
	// Granted is the tokens (fairCost) granted to the flow, settled to
	// what the calls cost, since the store first saw it.
	Granted float64
}

// KeyUsage is the counters of a fairness key's caps.
type KeyUsage struct {
	Key string
	// DayUsed is the tokens charged in the current day window; DayEnd is
	// when it resets.
	DayUsed float64
	DayEnd  time.Time
	// ShareLevel is what the key's per-minute buckets (Fairness.Share)
	// hold now, per bucket dimension.
	ShareLevel [NumDimensions]float64
}

// Ticket is capacity booked for a denied call.
type Ticket struct {
	Call    string
	Charges Charges
	At      time.Time
	Class   Class
	Expires time.Time
	// Key is the call's fairness key; Rank, Floor and Weight its class rule
	// and flow weight when it was booked.
	Key    string
	Rank   int
	Floor  float64
	Weight float64
	// Start and Finish are the ticket's virtual times in its flow: tickets
	// of one rank are due in the order of Finish (weighted fair queuing).
	Start, Finish float64

	// told is the time its call was last given (memory store only): the
	// store announces a ticket brought well before it (retime).
	told time.Time
}
