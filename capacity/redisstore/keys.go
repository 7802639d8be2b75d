package redisstore

import (
	"strconv"
	"sync/atomic"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Key layout. Every key and the release channel of a scope begin with the
// hash tag of its credential, {prefix:provider/credential}, so each script
// (including a credential-wide block) touches one Redis Cluster slot:
//
//	{P:C}:epoch        the credential's epoch token (no TTL; see package doc)
//	{P:C}:cb           credential-wide block; TTL: the block's end
//	{P:C}:text_until   until when new scopes keep a text state too (scripts 6.0; see textStateWindow); TTL: that time
//	{P:C}:state:K             scope state, a hash: the state packed (msgpack), and its text form for scripts before 6.0; TTL: when the scope stops mattering
//	{P:C}:leases:K            live leases by call (record lines); TTL: the latest expiry
//	{P:C}:tickets:K           booked tickets by call (record lines); TTL: at least the latest lapse
//	{P:C}:ticket_expiries:K   ticket lapse times (sorted set)
//	{P:C}:ticket_times:K      ticket times (sorted set)
//	{P:C}:ended:K             leases settled or released lately (scripts 3.2 to 5.0 only; see keyEnded)
//	{P:C}:flows:K             fair-queuing flows by class/key: rank, finish, granted; TTL: the state's
//	{P:C}:keycaps:K           fairness keys' cap counters by key; TTL: the state's
//	{P:C}:recent:K            the times leases were granted within tuning.ReorderWindow, oldest first (list; one entry
//	                          per lease until scripts 6.1); TTL: the window's
//	{P:C}:recentheld:K        what the live leases granted at each of those times hold, packed (msgpack), by time, but
//	                          for the latest two groups, which the state holds; TTL: the window's
//	{P:C}:order:R:K           rank R's tickets by virtual finish (sorted set), R from 0 to capacity.MaxRank; TTL: the tickets'
//	{P:C}:leasemarks:K        each live lease's mark and charges per bucket, packed (msgpack), by call (scripts 5.0 to 6.1
//	                          only); TTL: the leases'
//	{P:C}:lease_expiries:K    live leases by expiry (sorted set); TTL: the leases'
//	{P:C}:lapsed:K            leases expired or superseded lately, by when they are forgotten (sorted set)
//	{P:C}:livesums:K          what the live leases hold per bucket, summed by grant number in a tree of radix 16, packed
//	                          (msgpack; lua/state.lua, index.liveBefore); TTL: the leases'
//	{P:C}:rec:K               the scope's records, if the records engine holds it (recengine.go): a script
//	                          that finds them fails (TGRECORDS) rather than give the scope a state
//	{P:C}:lapsing:K           while tickets that lapsed together are reclaimed over several scripts
//	                          (tuning.MaxReclaim), the flows' finishes still to follow: flow and finish -> start
//	                          (lua/rules.lua, fair.unplaceAll); deleted when the last is reclaimed; TTL: the state's
//	{P:C}:f:K:CALL     a call's failure count; TTL: when it is forgotten
//	{P:C}:n:K          release channel (sharded pub/sub)
//	{P:C}:learn:K:KIND, {P:C}:learnin:K, {P:C}:learnkinds:K   what was learned (see learn.go)
//
// The cost ledger is kept per day under the day's own hash tag instead,
// {P:ledger:DAY}:rows, :tenants, :conns and :lease:LEASE (see ledger.go).
//
// P is Options.Prefix, C is Scope.CredentialKey() and K is Scope.Key(): names,
// path-escaped, never secrets (Scope.Validate refuses key-shaped names).
const (
	keyEpoch     = 0
	keyCredBlock = 1
	keyState     = 2
	keyLeases    = 3
	keyTickets   = 4
	keyTicketExp = 5
	keyTicketAt  = 6
	keyEnded     = 7  // added in scripts 3.2, unread since 5.1 (kept for older scripts)
	keyFlows     = 8  // added in scripts 4.0
	keyKeyCaps   = 9  // added in scripts 4.0
	keyRecent    = 10 // added in scripts 5.0
	keyOrder     = 11 // added in scripts 5.0: keyOrder + rank, for every rank
	// keyLeaseMarks and keyLeaseExpiries follow the order keys (added in
	// scripts 5.0).
	keyLeaseMarks    = keyOrder + capacity.MaxRank + 1
	keyLeaseExpiries = keyLeaseMarks + 1
	keyLapsed        = keyLeaseExpiries + 1 // added in scripts 5.1
	keyTextUntil     = keyLapsed + 1        // added in scripts 6.0
	keyRecentHeld    = keyTextUntil + 1     // added in scripts 6.1
	keyLiveSums      = keyRecentHeld + 1    // added in scripts 6.2
	keyLapsing       = keyLiveSums + 1      // added in scripts 6.3
	keyRecords       = keyLapsing + 1       // added in scripts 6.4: the records engine's, never written by a script
)

// stateInfix comes between the hash tag and the scope key in the name of a
// scope's state.
const stateInfix = ":state:"

// textUntilSuffix follows the hash tag in the name of a credential's
// text_until mark (textStateWindow, Store.KeepTextState).
const textUntilSuffix = ":text_until"

// scopeKeys are the precomputed names of one scope.
type scopeKeys struct {
	scope    capacity.Scope
	scopeKey string   // Scope.Key()
	credKey  string   // Scope.CredentialKey()
	tag      string   // {prefix:credential}, which begins every key of the scope
	keys     []string // the KEYS of every scope script, in key* order
	channel  string
	failure  string // prefix of failure keys; the call follows
	batch    batcher
	day      atomic.Pointer[dayBounds] // the last day boundaries computed
	// onRecordsAt and onScriptsAt are when this Store last found the scope
	// held by the records engine and by the scripts (unix ns; recroute.go).
	onRecordsAt, onScriptsAt atomic.Int64
}

func newScopeKeys(prefix string, sc capacity.Scope) *scopeKeys {
	tag := "{" + prefix + ":" + sc.CredentialKey() + "}"
	k := sc.Key()
	sk := &scopeKeys{
		scope:    sc,
		scopeKey: k,
		credKey:  sc.CredentialKey(),
		tag:      tag,
		keys: []string{
			keyEpoch:     tag + ":epoch",
			keyCredBlock: tag + ":cb",
			keyState:     tag + stateInfix + k,
			keyLeases:    tag + ":leases:" + k,
			keyTickets:   tag + ":tickets:" + k,
			keyTicketExp: tag + ":ticket_expiries:" + k,
			keyTicketAt:  tag + ":ticket_times:" + k,
			keyEnded:     tag + ":ended:" + k,
			keyFlows:     tag + ":flows:" + k,
			keyKeyCaps:   tag + ":keycaps:" + k,
			keyRecent:    tag + ":recent:" + k,
		},
		channel: tag + ":n:" + k,
		failure: tag + ":f:" + k + ":",
	}
	for r := range capacity.MaxRank + 1 {
		sk.keys = append(sk.keys, tag+":order:"+strconv.Itoa(r)+":"+k)
	}
	sk.keys = append(sk.keys, tag+":leasemarks:"+k, tag+":lease_expiries:"+k, tag+":lapsed:"+k, tag+textUntilSuffix,
		tag+":recentheld:"+k, tag+":livesums:"+k, tag+":lapsing:"+k, tag+recInfix+k)
	return sk
}

// keysFor returns sc's key names, cached per store.
func (s *Store) keysFor(sc capacity.Scope) *scopeKeys {
	return s.keyCache.get(sc, func() *scopeKeys { return newScopeKeys(s.opts.Prefix, sc) })
}
