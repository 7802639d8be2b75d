-- Code generated from constants.go (luaConstants) by `go generate`; DO NOT EDIT.
-- TestLuaConstants fails when this file and the Go table differ.

-- the format of a stored scope state (constants.go: stateFormat)
local STATE_FORMAT = 4
-- the format of the text state of scripts before 6.0 (constants.go: textStateFormat)
local TEXT_FORMAT = 3
-- textStateWindow (µs)
local TEXT_STATE_WINDOW = 86400000000
-- this version of the scripts (constants.go: scriptVersion)
local SCRIPT_VERSION = "6.3"
-- per-minute bucket dimensions: 1 .. NB (capacity.Dimension + 1)
local NB = 4
-- every dimension: 1 .. ND
local ND = 7
-- the per-minute buckets
local REQUESTS = 1
local INPUT_TOKENS = 2
local OUTPUT_TOKENS = 3
local TOKENS = 4
-- the per-day counters
local REQUESTS_PER_DAY = 5
local TOKENS_PER_DAY = 6
-- the in-flight slots
local IN_FLIGHT = 7
-- dimension names by index (capacity.Dimension.String)
local DIMENSIONS = {"requests", "input_tokens", "output_tokens", "tokens", "requests_per_day", "tokens_per_day", "in_flight"}
-- classes: 0 .. NCLASSES - 1 (capacity.Class)
local NCLASSES = 3
-- class ranks: 0 .. NRANKS - 1 (capacity.MaxRank)
local NRANKS = 8
-- how far a script walks: tuning.MaxIdleFlows, ForgetFlowsScan, MaxReclaim and LastTicketScan
local WALKS = {FLOWS_SCAN = 16, LAST_TICKETS = 64, MAX_IDLE_FLOWS = 1024, RECLAIM = 64}
-- tuning.RetimeMove
local RETIME_MOVE = 0.01
-- tuning.GatherSpacing (µs)
local GATHER_SPACING = 1000
-- tuning.ReorderWindow (µs)
local REORDER_WINDOW = 250000
-- capacity.MaxFairStart (µs)
local MAX_FAIR_START = 5000000
-- tuning.VirtualLogStep (µs)
local VIRTUAL_LOG_STEP = 250000
-- tuning.VirtualLogLength
local VIRTUAL_LOG_LENGTH = 16
-- absorbs float error when a refilled level meets a charge (capacity's epsilon)
local EPSILON = 1e-06
-- capacity.DefaultSafetyMargin
local DEFAULT_MARGIN = 0.95
-- capacity.DefaultBurst, in seconds
local DEFAULT_BURST = 5
-- every key outlives the moment it stops mattering by this much (µs)
local SLACK = 1000000
-- tuning.LoweredLimitMemory (µs)
local LOWERED_LIMIT_MEMORY = 600000000
-- tuning.MinReportedFraction
local MIN_REPORTED_FRACTION = 0.1
-- HalfOpenMemory (µs)
local HALF_OPEN_MEMORY = 86400000000
-- capacity.MaxBlock (µs): the longest a block lasts
local MAX_BLOCK = 2678400000000
-- tuning.LapsedLeaseMemory (µs)
local LAPSED_LEASE_MEMORY = 600000000
-- tuning.AnnounceMove (µs)
local ANNOUNCE_MOVE = 10000
-- tuning.OverdueTicket (µs)
local OVERDUE_TICKET = 100000
-- tuning.RetimeWindow
local RETIME_WINDOW = 32
-- tuning.CooldownCut: a 429's cut of the rate
local COOLDOWN_CUT = 0.7
-- tuning.RateRecovery: the rate's recovery a second
local RATE_RECOVERY = 0.01
-- tuning.MinRateFactor
local MIN_RATE_FACTOR = 0.25
-- capacity.Cooldown (a BlockReason)
local COOLDOWN = 1
-- capacity.DenyReason, by name
local DENY = {BLOCKED = 2, CAPACITY = 1, DAILY_QUOTA = 4, DEADLINE = 3, KEY_CAP = 6, KEY_QUOTA = 7, TICKET = 5}
-- operation codes of a batch, by name (constants.go)
local OP = {OBSERVE = 3, RELEASE = 4, RESERVE = 1, SETTLE = 2}
-- values of each operation after its code and call (wire.go)
local OP_FIELDS = {[1] = 23, [2] = 18, [3] = 32, [4] = 3}
-- each message's fields {name, width, kind}, in order (wire.go), read by readLayout
local LAYOUTS = {
  limits = {{"format", 1, "string"}, {"limit", 7, "number"}, {"burst_ns", 1, "number"}, {"burst", 1, "number"}, {"token_burst", 1, "number"}, {"margin", 1, "number"}, {"zone", 1, "string"}, {"offset", 1, "number"}, {"zone_offset", 1, "number"}, {"standard_floor", 1, "number"}, {"bulk_floor", 1, "number"}, {"aging_ns", 1, "number"}},
  observe = {{"day_boundary", 1, "number"}, {"next_boundary", 1, "number"}, {"has_limit.requests", 1, "number"}, {"limit.requests", 1, "number"}, {"has_remaining.requests", 1, "number"}, {"remaining.requests", 1, "number"}, {"has_limit.input_tokens", 1, "number"}, {"limit.input_tokens", 1, "number"}, {"has_remaining.input_tokens", 1, "number"}, {"remaining.input_tokens", 1, "number"}, {"has_limit.output_tokens", 1, "number"}, {"limit.output_tokens", 1, "number"}, {"has_remaining.output_tokens", 1, "number"}, {"remaining.output_tokens", 1, "number"}, {"has_limit.tokens", 1, "number"}, {"limit.tokens", 1, "number"}, {"has_remaining.tokens", 1, "number"}, {"remaining.tokens", 1, "number"}, {"mark_valid", 1, "number"}, {"mark", 4, "number"}, {"excluded", 4, "number"}, {"inflight", 4, "number"}, {"mark_seq", 1, "number"}},
  release = {{"day_boundary", 1, "number"}, {"next_boundary", 1, "number"}, {"id", 1, "string"}},
  reserve = {{"day_boundary", 1, "number"}, {"next_boundary", 1, "number"}, {"attempt", 1, "number"}, {"class", 1, "number"}, {"charges", 7, "number"}, {"ttl", 1, "number"}, {"deadline", 1, "number"}, {"book", 1, "number"}, {"since", 1, "number"}, {"rank", 1, "number"}, {"floor", 1, "number"}, {"weight", 1, "number"}, {"key", 1, "string"}, {"share", 1, "number"}, {"tokens_per_day", 1, "number"}, {"fair_start", 1, "number"}, {"limits", 1, "string"}},
  settle = {{"day_boundary", 1, "number"}, {"next_boundary", 1, "number"}, {"attempt", 1, "number"}, {"delta", 7, "number"}, {"class", 1, "number"}, {"key", 1, "string"}, {"weight", 1, "number"}, {"reserved", 4, "number"}, {"granted_at", 1, "number"}},
}
-- each KEYS index of a scope script, by name (keys.go)
local K = {CRED_BLOCK = 2, EPOCH = 1, FLOWS = 9, KEY_CAPS = 10, LAPSED = 22, LAPSING = 26, LEASES = 4, LEASE_EXPIRIES = 21, LEASE_MARKS = 20, LIVE_SUMS = 25, ORDER = 12, RECENT = 11, RECENT_HELD = 24, STATE = 3, TEXT_UNTIL = 23, TICKETS = 5, TICKET_EXPIRIES = 6, TICKET_TIMES = 7}
-- a stored lease (constants.go: leaseFields)
local LEASE_FIELDS = {{"attempt", "number"}, {"class", "number"}, {"granted_at", "number"}, {"expires", "number"}, {"charge", "dimension"}, {"mark", "dimension"}, {"key", "string"}, {"weight", "number"}, {"inflight", "dimension"}, {"seq", "number"}}
-- a stored ticket (constants.go: ticketFields)
local TICKET_FIELDS = {{"at", "number"}, {"expires", "number"}, {"class", "number"}, {"charge", "dimension"}, {"told", "number"}, {"key", "string"}, {"rank", "number"}, {"floor", "number"}, {"weight", "number"}, {"start", "number"}, {"finish", "number"}}
