package redisstore

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// lua/constants.lua is generated from luaConstants: the one table of the
// values the scripts share with Go. TestLuaConstants fails when the file
// and the table differ; `go generate` (or the test with -update) rewrites it.
//
//go:generate go test -run ^TestLuaConstants$ -update .

// stateFormat is the format of a scope's stored state: since scripts 6.0,
// one msgpack map of named fields in the state hash's "packed" field. The
// format only grows: fields are added, never renamed, reused or given
// another meaning, so a worker of the next version reads the state of the
// previous one and an older worker keeps the fields it does not know (see
// doc.go, Upgrades). A state of another format is refused with an error,
// never guessed at.
const stateFormat = 4

// textStateFormat is the format of the state scripts before 6.0 stored: a
// hash field of text per state field. Scripts 6.0 read it, and keep it up
// to date beside the packed state for textStateWindow after they last
// found it written by such a version, so that its workers and these share
// one budget through a rolling deploy or a rollback.
const textStateFormat = 3

// textStateWindow is how long a scope (and every new scope of its
// credential) keeps its text state up to date after a worker of a version
// before 6.0 last saved it. After it, the state hash says format 4 and such
// a worker's calls on the scope fail with an error, never a grant.
const textStateWindow = 24 * time.Hour

// scriptVersion names this version of the scripts; each saved state records
// the version that wrote it (the written_by field), so an operator sees a
// rolling deploy with HGET. Change it with every change to the scripts.
const scriptVersion = "6.4"

// Operation codes of a batch (lua/ops.lua): each operation is its code, its
// call, then a fixed number of fields.
const (
	opReserve = 1
	opSettle  = 2
	opObserve = 3
	opRelease = 4 // scripts 5.2 and later
)

// Field names of a stored lease and ticket (a line of name=value pairs, a
// per-dimension field once per dimension as name.dimension).
const (
	fieldAttempt   = "attempt"
	fieldClass     = "class"
	fieldGrantedAt = "granted_at"
	fieldExpires   = "expires"
	fieldCharge    = "charge"
	fieldMark      = "mark"
	fieldInFlight  = "inflight"
	fieldSeq       = "seq"
	fieldAt        = "at"
	fieldTold      = "told"
	fieldKey       = "key"
	fieldWeight    = "weight"
	fieldRank      = "rank"
	fieldFloor     = "floor"
	fieldStart     = "start"
	fieldFinish    = "finish"
)

// A record field holds a number, or one number per dimension.
const (
	kindNumber    = "number"
	kindDimension = "dimension"
	kindString    = "string" // a name without spaces or '=' (a fairness key)
)

// recordField is one field of a stored lease or ticket.
type recordField struct{ name, kind string }

// leaseFields and ticketFields are the stored records, in the order written.
var (
	leaseFields = []recordField{
		{fieldAttempt, kindNumber}, {fieldClass, kindNumber}, {fieldGrantedAt, kindNumber},
		{fieldExpires, kindNumber}, {fieldCharge, kindDimension}, {fieldMark, kindDimension},
		{fieldKey, kindString}, {fieldWeight, kindNumber}, // its flow (4.0): fair in lua/rules.lua
		{fieldInFlight, kindDimension}, // what the leases then live, and recent, held (4.4): Mark.InFlight
		{fieldSeq, kindNumber},         // its grant number (6.2): Mark.Seq
	}
	ticketFields = []recordField{
		{fieldAt, kindNumber}, {fieldExpires, kindNumber}, {fieldClass, kindNumber}, {fieldCharge, kindDimension},
		{fieldTold, kindNumber}, // the time its call was last given (3.3): lua/rules.lua, retime
		{fieldKey, kindString}, {fieldRank, kindNumber}, {fieldFloor, kindNumber}, {fieldWeight, kindNumber},
		{fieldStart, kindNumber}, {fieldFinish, kindNumber}, // its place in fair queuing (4.0): fair in lua/rules.lua
	}
)

// luaConstant is one constant of lua/constants.lua.
type luaConstant struct {
	name  string
	value any // int, int64, float64, string, []string, map[int]int, map[int]string, map[string]int, []recordField, map[string]wireLayout
	doc   string
}

// luaConstants returns every constant of lua/constants.lua, in order.
func luaConstants() []luaConstant {
	dims := make([]string, capacity.NumDimensions)
	for _, d := range capacity.Dimensions() {
		dims[d] = d.String()
	}
	return []luaConstant{
		{"STATE_FORMAT", stateFormat, "the format of a stored scope state (constants.go: stateFormat)"},
		{"TEXT_FORMAT", textStateFormat, "the format of the text state of scripts before 6.0 (constants.go: textStateFormat)"},
		{"TEXT_STATE_WINDOW", textStateWindow.Microseconds(), "textStateWindow (µs)"},
		{"SCRIPT_VERSION", scriptVersion, "this version of the scripts (constants.go: scriptVersion)"},
		{"NB", int(capacity.Tokens) + 1, "per-minute bucket dimensions: 1 .. NB (capacity.Dimension + 1)"},
		{"ND", capacity.NumDimensions, "every dimension: 1 .. ND"},
		{"REQUESTS", int(capacity.Requests) + 1, "the per-minute buckets"},
		{"INPUT_TOKENS", int(capacity.InputTokens) + 1, ""},
		{"OUTPUT_TOKENS", int(capacity.OutputTokens) + 1, ""},
		{"TOKENS", int(capacity.Tokens) + 1, ""},
		{"REQUESTS_PER_DAY", int(capacity.RequestsPerDay) + 1, "the per-day counters"},
		{"TOKENS_PER_DAY", int(capacity.TokensPerDay) + 1, ""},
		{"IN_FLIGHT", int(capacity.InFlight) + 1, "the in-flight slots"},
		{"DIMENSIONS", dims, "dimension names by index (capacity.Dimension.String)"},
		{"NCLASSES", len(capacity.Classes()), "classes: 0 .. NCLASSES - 1 (capacity.Class)"},
		{"NRANKS", capacity.MaxRank + 1, "class ranks: 0 .. NRANKS - 1 (capacity.MaxRank)"},
		// One table, not two locals: the library's main function holds at
		// most 200 locals.
		{"WALKS", map[string]int{
			"MAX_IDLE_FLOWS": tuning.MaxIdleFlows, "FLOWS_SCAN": tuning.ForgetFlowsScan, "RECLAIM": tuning.MaxReclaim,
			"LAST_TICKETS": tuning.LastTicketScan,
		}, "how far a script walks: tuning.MaxIdleFlows, ForgetFlowsScan, MaxReclaim and LastTicketScan"},
		{"RETIME_MOVE", tuning.RetimeMove, "tuning.RetimeMove"},
		{"GATHER_SPACING", tuning.GatherSpacing.Microseconds(), "tuning.GatherSpacing (µs)"},
		{"REORDER_WINDOW", tuning.ReorderWindow.Microseconds(), "tuning.ReorderWindow (µs)"},
		{"MAX_FAIR_START", capacity.MaxFairStart.Microseconds(), "capacity.MaxFairStart (µs)"},
		{"VIRTUAL_LOG_STEP", tuning.VirtualLogStep.Microseconds(), "tuning.VirtualLogStep (µs)"},
		{"VIRTUAL_LOG_LENGTH", tuning.VirtualLogLength, "tuning.VirtualLogLength"},
		{"EPSILON", 1e-6, "absorbs float error when a refilled level meets a charge (capacity's epsilon)"},
		{"DEFAULT_MARGIN", capacity.DefaultSafetyMargin, "capacity.DefaultSafetyMargin"},
		{"DEFAULT_BURST", capacity.DefaultBurst.Seconds(), "capacity.DefaultBurst, in seconds"},
		{"SLACK", slack.Microseconds(), "every key outlives the moment it stops mattering by this much (µs)"},
		{"LOWERED_LIMIT_MEMORY", tuning.LoweredLimitMemory.Microseconds(), "tuning.LoweredLimitMemory (µs)"},
		{"MIN_REPORTED_FRACTION", tuning.MinReportedFraction, "tuning.MinReportedFraction"},
		{"HALF_OPEN_MEMORY", HalfOpenMemory.Microseconds(), "HalfOpenMemory (µs)"},
		{"MAX_BLOCK", capacity.MaxBlock.Microseconds(), "capacity.MaxBlock (µs): the longest a block lasts"},
		{"LAPSED_LEASE_MEMORY", tuning.LapsedLeaseMemory.Microseconds(), "tuning.LapsedLeaseMemory (µs)"},
		{"ANNOUNCE_MOVE", tuning.AnnounceMove.Microseconds(), "tuning.AnnounceMove (µs)"},
		{"OVERDUE_TICKET", tuning.OverdueTicket.Microseconds(), "tuning.OverdueTicket (µs)"},
		{"RETIME_WINDOW", tuning.RetimeWindow, "tuning.RetimeWindow"},
		{"COOLDOWN_CUT", tuning.CooldownCut, "tuning.CooldownCut: a 429's cut of the rate"},
		{"RATE_RECOVERY", tuning.RateRecovery, "tuning.RateRecovery: the rate's recovery a second"},
		{"MIN_RATE_FACTOR", tuning.MinRateFactor, "tuning.MinRateFactor"},
		{"COOLDOWN", int(capacity.Cooldown), "capacity.Cooldown (a BlockReason)"},
		{"DENY", map[string]int{
			"CAPACITY": int(capacity.DenyCapacity), "BLOCKED": int(capacity.DenyBlocked), "DEADLINE": int(capacity.DenyDeadline),
			"DAILY_QUOTA": int(capacity.DenyDailyQuota), "TICKET": int(capacity.DenyTicket), "KEY_CAP": int(capacity.DenyKeyCap),
			"KEY_QUOTA": int(capacity.DenyKeyQuota),
		}, "capacity.DenyReason, by name"},
		{"OP", map[string]int{"RESERVE": opReserve, "SETTLE": opSettle, "OBSERVE": opObserve, "RELEASE": opRelease},
			"operation codes of a batch, by name (constants.go)"},
		{"OP_FIELDS", map[int]int{opReserve: reserveLayout.size(), opSettle: settleLayout.size(), opObserve: observeLayout.size(), opRelease: releaseLayout.size()}, "values of each operation after its code and call (wire.go)"},
		{"LAYOUTS", map[string]wireLayout{"reserve": reserveLayout, "settle": settleLayout, "observe": observeLayout, "release": releaseLayout, "limits": limitsLayout},
			"each message's fields {name, width, kind}, in order (wire.go), read by readLayout"},
		{"K", map[string]int{
			"EPOCH": keyEpoch + 1, "CRED_BLOCK": keyCredBlock + 1, "STATE": keyState + 1, "LEASES": keyLeases + 1,
			"TICKETS": keyTickets + 1, "TICKET_EXPIRIES": keyTicketExp + 1, "TICKET_TIMES": keyTicketAt + 1,
			"FLOWS": keyFlows + 1, "KEY_CAPS": keyKeyCaps + 1, "RECENT": keyRecent + 1, "LEASE_MARKS": keyLeaseMarks + 1,
			"LEASE_EXPIRIES": keyLeaseExpiries + 1, "LAPSED": keyLapsed + 1, "TEXT_UNTIL": keyTextUntil + 1,
			"RECENT_HELD": keyRecentHeld + 1, "LIVE_SUMS": keyLiveSums + 1, "LAPSING": keyLapsing + 1, "RECORDS": keyRecords + 1,
			"ORDER": keyOrder + 1, // rank r's tickets in their order: KEYS[K.ORDER + r]
		}, "each KEYS index of a scope script, by name (keys.go)"},
		{"LEASE_FIELDS", leaseFields, "a stored lease (constants.go: leaseFields)"},
		{"TICKET_FIELDS", ticketFields, "a stored ticket (constants.go: ticketFields)"},
	}
}

// renderLuaConstants returns lua/constants.lua as generated from
// luaConstants.
func renderLuaConstants() string {
	var b strings.Builder
	b.WriteString("-- Code generated from constants.go (luaConstants) by `go generate`; DO NOT EDIT.\n")
	b.WriteString("-- TestLuaConstants fails when this file and the Go table differ.\n\n")
	for _, c := range luaConstants() {
		if c.doc != "" {
			fmt.Fprintf(&b, "-- %s\n", c.doc)
		}
		fmt.Fprintf(&b, "local %s = %s\n", c.name, luaValue(c.value))
	}
	return b.String()
}

// luaValue writes v as a Lua literal.
func luaValue(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return strconv.Quote(v)
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = strconv.Quote(s)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[int]int:
		return luaMap(v, strconv.Itoa, strconv.Itoa)
	case map[int]string:
		return luaMap(v, strconv.Itoa, strconv.Quote)
	case map[string]int:
		names := slices.Sorted(maps.Keys(v))
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = name + " = " + strconv.Itoa(v[name])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[string]wireLayout:
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, name := range names {
			fields := make([]string, len(v[name]))
			for j, f := range v[name] {
				fields[j] = "{" + strconv.Quote(f.name) + ", " + strconv.Itoa(f.width) + ", " + strconv.Quote(f.kind) + "}"
			}
			parts[i] = name + " = {" + strings.Join(fields, ", ") + "}"
		}
		return "{\n  " + strings.Join(parts, ",\n  ") + ",\n}"
	case []recordField:
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = "{" + strconv.Quote(f.name) + ", " + strconv.Quote(f.kind) + "}"
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	panic(fmt.Sprintf("redisstore: no Lua literal for %T", v))
}

// luaMap writes m as a Lua table constructor, keys in order.
func luaMap[K int, V any](m map[K]V, key func(K) string, val func(V) string) string {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "[" + key(k) + "] = " + val(m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
