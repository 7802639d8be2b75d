// Package redisstore is a capacity.Store held in Redis: every worker on every
// machine that uses the same Redis and prefix shares one budget per quota
// scope. By default a worker decides each operation with
// capacity.MemoryStore's rules on its copy of the scope's records, and one
// short Lua script writes what changed, atomically, if no other worker wrote
// first (The records engine, below); with Options.Engine EngineScripts every
// decision is one atomic Lua script in Redis time (The scripts).
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379"})
//	store, err := redisstore.New(rdb, redisstore.Options{})
//	...
//	defer store.Close()
//
// # Semantics
//
// The semantics are capacity.MemoryStore's, and the package runs the same
// contract suite (capacity/storetest) plus a test that drives both stores
// through random operations and requires the same answers: all-or-nothing
// admission over every dimension, continuously refilling buckets that start
// at the burst level, per-day windows rolled at the limits' DayBoundary
// (computed in Go, rolled by the script when Redis time passes it), tickets,
// idempotent (Call, Attempt) leases with supersession, leases reclaimed when
// they expire by any later call on the scope (no sweeper), Observe with Mark
// and lowered limits, scope and credential-wide (half-open) blocks, failure
// counts, class floors and aging (Limits.StandardFloor, BulkFloor,
// AgingAfter) with higher classes overtaking lower classes' booked tickets.
// Times have microsecond resolution; RetryAt is rounded up to it, and
// Request.Since is rounded up to it (aging never lifts a call early).
//
// Concurrent reserves, settles and observations of one Store on one scope
// share a round trip (group commit): each is still decided on its own,
// atomically, in arrival order, and each call takes part in exactly one
// round trip per operation; a lone call is sent at once. At most two batches of a scope
// are in Redis at once, and the second is sent only once it is as large as
// the first (or when the first returns): a script's fixed cost (defining
// its functions, reading and writing the state) is most of a small batch's.
//
// # The scripts
//
// The rules are written twice on purpose: capacity.MemoryStore in Go is the
// readable reference, and the Lua in lua/ is its transcription, function by
// function under the same names (lua/rules.lua for memscope.go, lua/ops.lua
// for memstore.go), kept equal by a differential test that drives both
// through random operations. The scripts are plain Lua run as written:
// lua/constants.lua is generated from one Go table (constants.go) and a test
// fails when they differ; a scope script is eval.lua, globals.lua,
// constants.lua, state.lua, rules.lua and its own file, joined, and the
// function library is every file (scripts.go).
// docs/decisions/0001-scheduling-core.md says why.
//
// # The records engine
//
// Options.Engine EngineRecords, the default, decides every operation in the
// worker, with capacity.MemoryStore's rules, on a copy of the scope that
// the Store keeps (decision 0008): the rules are then written once, in Go.
// Redis holds each scope's records (its leases, tickets, flows, failures and
// the rest, each a hash field, and a blob of what the scope holds by value)
// and a log of its last writes (16, more for a large scope). One script of
// 87 lines of Lua, lua/exchange.lua, writes the records a batch of the
// worker's operations changed if the scope is still at the version the copy
// holds, or returns what the copy missed; the copy applies it and decides
// the batch again. A write that reaches Redis more than a second after its
// decision (Redis paused, the worker stalled) is refused the same way, so
// that no lease is granted already run out. So a batch costs Redis one script call on a current copy
// and two when another worker wrote first (a copy idle for 20 ms reads what
// it missed first, unless its last such read found that no other worker
// had written: a worker alone on a scope writes without reading, and reads
// first at least every 10 s), and no script walks a queue: the
// work in Redis grows with what the batch changed, not with the calls
// waiting, the tickets booked or the leases ended lately. A copy further
// behind than the log reads every record, 256 at a time (HSCAN) for a large
// scope. A copy unused for a minute is dropped, and read whole at its
// scope's next use.
//
// Its semantics are the memory store's, in the time each worker estimates
// Redis's to be: the last TIME it read plus the time elapsed since, never
// before the scope's last write. The contract suite passes on it on one
// store, on two stores of one prefix taking turns, on a Cluster and as the
// user below. Its keys ({P:C}:rec:K, :reclog:K, :reccred) are beside the
// scripts', on the same hash tag and channel.
//
// A scope has one state, the scripts' or the engine's: Options.Engine says
// which a scope that has neither starts with, and a scope keeps the one it
// has until that state stops mattering and expires. Each side refuses, in
// the scope's slot, a scope the other holds (the exchange replies that the
// scripts hold it; a script fails with TGRECORDS rather than give a state to
// a scope that has records), and the Store runs the operation with the
// other. So workers of scripts 6.4 and later share one budget per scope
// whatever their Engine, and a rolling deploy from 6.4 to this version, or
// back, keeps one budget. Scripts of 6.3 and earlier do not refuse: a scope
// the engine holds gets a second budget from such a worker. So from 6.3 or
// earlier, either deploy this version with Engine EngineScripts and drop it
// in a later deploy, once no 6.3 worker runs, or upgrade in one step: stop
// every 6.3 worker, then start this version's; a scope 6.3 left a state to
// stays on this version's scripts, its calls in flight held once
// (TestUpgradeFromScripts63InOneStep). A busy scope moves when it first
// rests: when its state of the scripts expires (Keys and
// their lifetime, below). A credential-wide block is written where both engines
// read it; while a credential's scopes are on both, a half-open one lets one
// probe through on each. Learned call sizes,
// the cost ledger, the fallback budget, FailClosed, waiting and Stats are
// the same on both. A scope whose records are found gone before they
// stopped mattering starts afresh, and Stats counts it as a reset, as a lost
// epoch is with the scripts. Its least ACL:
//
//	ACL SETUSER tollgate on >PASSWORD resetkeys ~{tollgate:* resetchannels &{tollgate:* -@all
//	  +evalsha +eval +ssubscribe +sunsubscribe +ping +hello +hscan +exists +get +set +del +time
//	  +hget +hmget +hset +hdel +hlen +hgetall +rpush +lrange +ltrim +llen +pexpire +spublish
//
// # Upgrades
//
// A scope's state is one msgpack map of named fields (format 4, since
// scripts 6.0), in the field "packed" of a Redis hash that also names the
// version that saved it last (written_by) and the format; leases and
// tickets are lines of name=value pairs. The formats only grow: a field is
// added, never renamed, reused or given another meaning; a field the reader
// does not know is kept as it is and one it lacks reads as
// zero. So workers of two versions share one prefix and one budget during a
// rolling deploy or a rollback: each reads the state, leases and tickets
// the other wrote (TestRollingUpgrade runs the previous version's scripts,
// kept in testdata/, against this version's on one scope). The state records
// the script version that wrote it last (written_by). A state of an unknown
// format is an error, never a grant. Scripts 5.0 keep four indexes older
// scripts do not (the leases granted lately, for Mark.InFlight; the tickets'
// order; the leases' marks, for reports; the leases' expiries): a state
// that a version without them (4.x, or an unknown one) saved last is
// re-indexed once, from its leases and tickets, before it is decided on;
// 5.x and 6.0 versions keep them alike and re-index nothing among
// themselves. Scripts 6.1 keep the leases granted lately in groups by grant
// time ({P:C}:recentheld:K, and the latest two groups in the state), so a state
// that any other version saved last is re-indexed once by 6.1, and one
// that 6.1 saved last is re-indexed once by 5.x and 6.0: a rolling deploy
// keeps one budget and pays a walk of the scope's leases and tickets each
// time the version that saves the scope changes. Scripts 6.2 number the
// leases as they are granted (Mark.Seq) and sum what the live ones hold by
// that number ({P:C}:livesums:K), where 6.1 kept each lease's mark, so they
// re-index a state that any other version saved last in the same way; a
// lease granted or renewed by another version takes the next number.
// Scripts 6.3 reclaim at most tuning.MaxReclaim expired leases and lapsed
// tickets a script, the batch sent again until none is left, and keep the
// same indexes as 6.2: neither re-indexes what the other saved, and a 6.2
// worker reclaims what is left at once. Scripts 5.1 remember
// the leases that lapsed (expired or superseded) instead of every lease
// settled or released: while 5.0 and 5.1 both run, a settle repeated across the two
// may apply its debt (usage beyond the reservation) twice, or a lease
// lapsed under 5.0 may have its late debt forgotten; grants and the budget
// are unaffected. Scripts 5.2 send releases in the batch script (5.1's
// workers keep their release script), the state unchanged. Scripts 5.3 are
// also a function library; the state, leases and tickets are as 5.2's.
// Scripts 5.4 retime only the first tickets after a refund or a booking
// placed ahead, as after a release, claim no ticket further back on a
// retime-pending scope, and keep four more state fields that 5.3 leaves as
// they are. While both run, a booking may lose its refund's credit in the
// fair order, a ticket may stay later than the budget allows until it nears
// the head, and a 5.3 worker may claim a ticket further back at its kept
// time, which may be early. Grants and the budget are unaffected. Scripts
// 5.5 retime only the first tickets after every move that pushes them back
// (debt, a lower report or limit, a 429's pause, a borrow), with the state
// of 5.4; while both run, a 5.4 worker may swap an early call with a
// ticket further back whose kept time looks overdue. Scripts 6.0 retime only
// the first tickets after a report of a higher level or a raised limit too:
// while 5.x and 6.0 both run, a ticket further back stays later than the
// budget allows until it nears the head, as after a refund.
//
// Scripts before 6.0 kept each state field in a hash field of its own, as
// text (format 3). Scripts 6.0 read that text when such a version saved the
// state last, and from then on keep it up to date, whole, beside the packed
// state, for a day (textStateWindow) after such a version last saved the
// scope; a new scope of the same credential keeps it too for as long. So a
// rolling deploy from 5.x, or a rollback to it within that day, keeps one
// budget. After the day the text is dropped and the hash says format 4:
// a 5.x worker's calls on that scope then fail with "unknown scope state
// format", never a grant. The same holds for a scope that a 6.0 worker
// creates on a credential where no 6.0 worker found a 5.x save within the
// day (a credential idle when the deploy began): finish the deploy, or let
// the old workers' failed activities retry on new ones. Store.KeepTextState
// (the CLI's `tollgate keep-text`) marks every credential to keep the text
// for as long as asked, from each scope's next save: run it before a
// deploy from 5.x to rule those refusals out, or before a later rollback.
// Writing the text costs a 6.0 worker about what 5.x cost while it lasts
// (TestTextStateWindow).
//
// The one exception is the step to the hash of named fields from the struct-packed state of
// earlier releases: those keep their state under other key names (:s:,
// :l:, ...), so during that one deploy old and new workers hold separate
// budgets. Lower Limits.SafetyMargin (or the worker count) for its duration,
// or stop the old workers first.
//
// # Clients, Cluster, ACL and TLS
//
// New takes any redis.UniversalClient: *redis.Client, a Sentinel failover
// client (redis.NewFailoverClient), *redis.ClusterClient or *redis.Ring.
// Redis 7.0 or later is required (sharded pub/sub). Every key and the
// release channel of a scope begin with the hash tag of its credential,
// {prefix:provider/credential}, so each script, a credential-wide block
// included, touches one Cluster slot; see keys.go for the layout. Keys hold
// names (Scope.Key), never secrets: Scope.Validate refuses key-shaped
// credential names. When a slot moves to another master, the store follows
// it (its sharded subscriptions too); while the slot's keys are split
// between the two, that credential's operations fail with
// capacity.ErrStoreUnavailable and the others go on. docs/operations.md
// says what a Cluster or Sentinel failover can lose.
//
// Authentication and TLS are the client's: set Username and Password (Redis
// ACL) and TLSConfig in redis.Options (or ClusterOptions, FailoverOptions).
// On the default engine, while no scope of the prefix holds the scripts'
// state, the least a store's user needs is the records engine's ACL (The
// records engine, above). The scripts (EngineScripts, or a prefix whose
// scopes still hold their state after an upgrade) need these, for the
// default prefix; grant both lists while a prefix moves:
//
//	ACL SETUSER tollgate on >PASSWORD resetkeys ~{tollgate:* resetchannels &{tollgate:* -@all
//	  +evalsha +eval +evalsha_ro +eval_ro +ssubscribe +sunsubscribe +ping +hello +del +exists
//	  +time +get +mget +set +hget +hmget +hset +hdel +hgetall +hincrby +hincrbyfloat +pexpire
//	  +zadd +zrem +zscore +zremrangebyscore +zrange +zrevrange +zrangebyscore +zcard +zcount +spublish +rpush +lrange +ltrim
//
// # Scripts as functions
//
// The store's scripts are also one Redis function library, which it loads
// on each primary (FUNCTION LOAD) the first time a call finds it missing,
// and calls by name (FCALL): a function costs Redis about a fifth less than
// the same script sent with EVALSHA, which first defines every function of
// the scripts (decision 0007). Grant the user these too:
//
//	+fcall +fcall_ro +function|load
//
// Without them the store sends the scripts with EVALSHA, as before: the
// first FCALL or FUNCTION LOAD refused (NOPERM) turns the library off for
// that Store. Calls that find the library missing together load it once. The
// library is named tollgate_ and the SHA-1 of its code, so two versions of
// tollgate load side by side during a rolling deploy. Libraries stay in
// Redis (they are saved and replicated like data); after a deploy, the
// previous version's can be removed with FUNCTION DELETE (FUNCTION LIST
// LIBRARYNAME tollgate_ shows them).
//
// # Time
//
// Redis is the clock: scripts read TIME, so workers with skewed clocks agree.
// Options.Clock replaces it for tests only.
//
// # Keys and their lifetime
//
// Each key's TTL says when it stops mattering: a scope's state when its
// buckets are full again, its daily count resets (for a limited daily
// budget), its leases have expired, its tickets lapsed, its block ended and
// a provider-reported lower limit is forgotten (LoweredLimitMemory after the
// last report); the lease key at its latest expiry; the credential block at
// its end (a half-open block HalfOpenMemory later); a failure count ttl after
// its last failure. No TTL is renewed by traffic beyond what the state needs.
// The one key without a TTL is the credential's epoch, a small token.
//
// # Lost state
//
// A store that finds a credential's epoch gone or changed (Redis restarted
// without persistence, failed over to a replica that missed writes, evicted
// keys) drops whatever state of the credential remains and starts each
// scope afresh at the burst level, like a new scope; Stats counts it. Leases
// granted before the loss are unknown afterwards: settling one applies
// nothing, renewing one returns capacity.ErrLeaseNotFound. Across a loss a
// scope can grant up to one extra burst of each per-minute budget, and its
// per-day counts start again at zero. A failover to a replica that has the
// epoch but missed the last writes is not detected: the grants it missed
// are granted again. Scripts reload on NOSCRIPT.
//
// # Waiting
//
// Store implements capacity.Notifier with sharded pub/sub: one subscription
// per credential and store, fanned out locally. A release (settle, release,
// an expired lease reclaimed, a block lifted) wakes the longest local waiter
// of the scope in each worker, and a waiter that is granted with room left
// wakes the next, so a thousand waiting calls cost Redis about one call per
// release. Releases are published only while some caller may be waiting: no
// later than the last RetryAt the scope handed out. On the records engine a
// release wakes every local waiter of the scope, whose calls one batch
// decides.
//
// It implements capacity.TicketNotifier on the same channel: a script that
// brings booked tickets well forward (a refund, a higher report, a released
// booking) publishes their calls, and the worker whose call waits for one
// wakes it, so ticket holders sleep until their time without asking again.
// A call id with a space in it is never announced (its holder claims at
// its old time).
//
// # When Redis is unreachable
//
// Options.OnUnavailable chooses. FailClosed (the default): every operation
// returns an error wrapping capacity.ErrStoreUnavailable (and the cause);
// nothing is granted blind; capacity.Wait returns it. FallbackLocal: Reserve
// admits from a local capacity.MemoryStore whose limits are the requested
// ones scaled by Options.FallbackFraction, so N workers together stay under
// N × FallbackFraction of the budget; a demand too large for the scaled
// budget but not for the real one gets the unavailable error (a wait), never
// a terminal capacity.DemandTooLargeError. Leases granted locally settle
// locally; Redis never learns of them. In both cases the store stops dialling
// for Options.ProbeInterval after a failure, and never panics.
package redisstore
