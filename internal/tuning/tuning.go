// Package tuning holds the scheduling core's tuning knobs: the constants
// both stores share (the memory store reads them, and the Redis store's
// scripts are generated from them). They are not options: each is a
// measured choice recorded where it is declared or in docs/decisions.
package tuning

import "time"

// CooldownCut and RateRecovery shape how a scope's rate answers a
// provider's 429 (a Cooldown block): the refill rate of every per-minute
// bucket drops to CooldownCut of what it was (multiplicative decrease, to
// MinRateFactor of the limit's rate at the least) and grows back by
// RateRecovery of the limit's rate each second (additive increase). A
// client tollgate does not see, spending on the same key, makes the
// provider refill slower than the limit says: the rate settles just under
// what is left, with a 429 about every (1 − CooldownCut) / RateRecovery
// seconds, 30 s, at the most. While the rate is cut, a provider's report
// raises a level a little short of what it proves (memScope.raiseTo).
const (
	CooldownCut   = 0.7
	RateRecovery  = 0.01
	MinRateFactor = 0.25
)

// VirtualLogStep and VirtualLogLength bound the log of a rank's virtual
// time (fairState.past): a call that waited to be placed (in Temporal's
// task queue, behind a worker's busy slots) is placed at the virtual time
// of when it was scheduled, up to VirtualLogStep × VirtualLogLength ago.
const (
	VirtualLogStep   = 250 * time.Millisecond
	VirtualLogLength = 16
)

// MaxIdleFlows is how many flows a scope keeps before it forgets the
// flows not ahead of their rank's virtual time (they would start there
// anyway). From then on each call placed looks at the next ForgetFlowsScan
// flows, in the store's own order, wrapping around, and forgets the idle
// ones among them: no placement reads every flow of a scope whose tenants
// are all waiting.
const (
	MaxIdleFlows    = 1024
	ForgetFlowsScan = 16
)

// MaxReclaim is the most expired leases, and the most lapsed tickets, one
// script of the Redis store reclaims. When more expired at once (a worker
// that held many crashed), the script reclaims that many, saves and
// decides nothing, and the store sends it again until none is left: no
// script walks them all, and no decision sees an expired one held.
const MaxReclaim = 64

// LastTicketScan is how many of the latest tickets a call larger than the
// bucket's unbooked part looks at for the last one that charges the
// bucket, whose time it waits for at least. Past them it waits for the
// time of the last it looked at, which is no earlier: a scope whose latest
// tickets charge nothing of the bucket (embeddings, which charge no output
// tokens, booked behind a chat call) is not read ticket by ticket.
const LastTicketScan = 64

// GatherSpacing is how far apart the calls gathered by Request.FairStart
// are due when the gathering ends, in their fair order: released in one
// instant, they would reach the provider in whatever order their
// goroutines and round trips happen to take, and the first burst, shared
// by weight in sum, would not be shared by weight along the way.
const GatherSpacing = time.Millisecond

// AnnounceMove is the least move forward of a booked ticket that a store
// announces to the ticket's call (TicketNotifier), beside a move of more
// than a quarter of the wait left (broughtForward): once the wait left is
// short, a call comes at most that late for its ticket, and at the end of
// a batch a ticket's lateness is the batch's. An announcement costs the
// call one Reserve. (Until scripts 4.6 the floor was TicketRecheck, 250
// ms: decision 0004.)
const AnnounceMove = 10 * time.Millisecond

// RetimeWindow is how many booked tickets, from the head of their order,
// a retime moves (a release, a refund or debt, a report of a lower level, a
// lower limit, a 429's pause, a borrow, a booking placed ahead), and a
// Reserve after it moves again once a ticket left them. The rest keep their
// times, later or earlier than the budget allows, and are not claimed,
// until they come that near the head: none of those moves walks the queue,
// and a move forward is announced only to a ticket whose wait it cuts by a
// quarter (AnnounceMove), which one call's release or refund does only near
// the head. A report of a higher level and a raised limit may bring tickets
// far back well forward, and retime every ticket so that their calls are
// told. (Until scripts 5.5 every move but a release's, a refund's and a
// booking's walked every ticket.)
const RetimeWindow = 32

// OverdueTicket is how long past its time a booked ticket waits for its
// call before a call that came early for a later ticket (of the same class
// or higher) may take its place: a call that is away (parked in Temporal)
// does not leave capacity idle while another waits for it.
const OverdueTicket = 100 * time.Millisecond

// LoweredLimitMemory is how long a provider-reported limit below the
// configured one is kept after the last report that said so: a provider's
// answer is evidence, not law.
const LoweredLimitMemory = 10 * time.Minute

// MinReportedFraction is the least fraction of a configured limit that a
// provider's report can lower it to.
const MinReportedFraction = 0.1

// HalfOpenMemory is how long a shared store keeps a half-open block
// whose probe nobody claims after its half-open time: it ends with a
// probe, not on its own, but an abandoned one is not kept forever.
const HalfOpenMemory = 24 * time.Hour

// LapsedLeaseMemory is how long a store remembers a lease that ended
// without a settle or release (it expired, or a later attempt of its call
// superseded it), so that the settle its call sends when it answers still
// applies the debt, the usage beyond the reservation, once. Ten minutes
// covers an answer that outlives its lease's renewals by as long as a model
// call runs; a settle later than that applies nothing (its reservation
// stays spent). A lease that was settled or released is not remembered: a
// second settle or release finds it gone and applies nothing.
const LapsedLeaseMemory = 10 * time.Minute

// ReorderWindow is how long before a call's grant another call may have
// been granted and still reach the provider after it (sent late: by
// another worker, or delayed on its way): Mark.InFlight counts the live
// leases granted within it. A call granted earlier is taken to have
// arrived first.
const ReorderWindow = 250 * time.Millisecond

// RetimeMove is the least change of a bucket's level, as a fraction of its
// capacity, that makes a provider's report move booked tickets (retime):
// reports correct a level by a little with every response, and a ticket
// a trifle early is checked against the provider's bucket when claimed
// (ticketShortfall), one a trifle late loses as little.
const RetimeMove = 0.01

// TicketRecheck is how often a ticket holder asks again about a ticket
// the store may have moved forward, when the store does not announce such
// moves (it is not a TicketNotifier, which announces a move of more than
// AnnounceMove and a quarter of the wait left, and whose holders sleep
// until their time): a holder with more than 2 × TicketRecheck to wait
// sleeps half of it and asks again.
const TicketRecheck = 250 * time.Millisecond
