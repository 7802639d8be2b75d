// Package capacity is tollgate's model of a provider's rate limits and the
// contract of the stores that hold it.
//
// A Scope names one quota: a provider, its limit group (a model family
// metered together), a credential name (never the secret) and an optional
// region. Limits describe the quota as the provider states it: requests,
// input, output and combined tokens per minute, requests and tokens per day,
// and calls in flight. Each per-minute limit is a continuously refilling
// bucket holding Limits.Burst of its rate (5 s by default), of which
// Limits.SafetyMargin (0.95) is used.
//
// A call asks a Store to Reserve its Charges, which its provider's profile
// computes from the call's Demand (package accounting). A grant is a Lease,
// renewed while the call runs; when the call answers, Settle charges what
// it used (Usage, through the profile) and Observe corrects the scope from
// the provider's rate-limit headers (package headers). A denial says when the demand will
// fit (Reservation.RetryAt) and may book that capacity for the call, which is
// then granted at that time without competing again. Classes rank calls
// (interactive before standard before bulk) and fairness keys share a class
// between tenants by the tokens they are charged.
//
// Two stores implement the contract: NewMemoryStore, for one process, and
// the Redis store of package redisstore, for many workers. Both pass one
// contract suite (package storetest), and the Redis store is tested to
// answer as the memory store does. The guarantee they give is conformance:
// over any interval [a, b], the charges granted in a dimension never exceed
// the bucket plus its rate × (b − a), and never more calls are in flight
// than MaxInFlight, whatever the number of workers sharing the store.
package capacity
