package redisstore

import (
	"embed"
	"encoding/binary"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// slack is added to every key's TTL: a key outlives the moment it stops
// mattering by this much, so clock jitter never drops live state.
const slack = time.Second

// LoweredLimitMemory is how long a provider-reported limit below the
// configured one is remembered after the last report that said so, when the
// scope is otherwise idle.
const LoweredLimitMemory = time.Hour

// HalfOpenMemory is how long a half-open block whose probe nobody claims is
// kept after its half-open time: it ends with a probe, not on its own, but an
// abandoned one is not kept forever.
const HalfOpenMemory = 24 * time.Hour

// Scripts: one per operation, each one round trip (EVALSHA, falling back to
// EVAL on NOSCRIPT after a restart or failover).
var (
	scriptOps       = scopeScript("ops.lua")
	scriptRelease   = scopeScript("release.lua")
	scriptRenew     = scopeScript("renew.lua")
	scriptBlock     = scopeScript("block.lua")
	scriptSnapshot  = scopeScript("snapshot.lua")
	scriptUnblock   = scopeScript("unblock.lua")
	scriptBlockCred = plainScript("blockcred.lua")
	scriptFailure   = plainScript("failure.lua")
)

// scopeScript returns common.lua followed by name, as one script.
func scopeScript(name string) *redis.Script {
	return redis.NewScript(render(scopeSource(mustRead("lua/common.lua"), mustRead("lua/"+name))))
}

// functionsMarker splits a scope script's file: the script-wide variables
// above it, the functions and code below. A file without it is all code.
const functionsMarker = "\n-- @functions"

// scopeSource joins common and script as one chunk: their variables at the
// top, then their functions and code inside a function of their own, called
// once. Every script defines its functions anew on every call, and a
// function that uses a variable of the chunk captures it: from the chunk's
// own locals Lua 5.1 looks it up in a list of every captured local (and
// allocates it the first time), from an enclosing function's upvalues it
// copies a pointer. The one inner function captures each variable once;
// the dozens of functions defined inside it capture them cheaply.
func scopeSource(common, script string) string {
	split := func(src string) (vars, code string) {
		if i := strings.Index(src, functionsMarker); i >= 0 {
			return src[:i+1], src[i+1:]
		}
		return "", src
	}
	cv, cc := split(common)
	sv, sc := split(script)
	return cv + sv + "return (function()\n" + cc + "\n" + sc + "\nend)()\n"
}

func plainScript(name string) *redis.Script {
	return redis.NewScript(render(mustRead("lua/" + name)))
}

// mustRead reads an embedded script; the files are part of the binary, so a
// failure is a build defect caught by every test.
func mustRead(name string) string {
	b, err := luaFiles.ReadFile(name)
	if err != nil {
		panic("redisstore: missing embedded script " + name)
	}
	return string(b)
}

// layout is the flat state array of a scope (lua/common.lua) and the other
// constants the scripts share with Go, written into the scripts as literals.
var layout = map[string]string{
	// State fields; per-dimension ones are OFFSET + d, d from 1.
	"EPOCH":   strconv.Itoa(stateEpoch), // epoch token the state belongs to
	"STARTED": "2",                      // limits installed (0/1)
	"SIG":     strconv.Itoa(stateSig),   // limits signature
	"L":       "3",                      // configured limits, 4..10
	"MARGIN":  "11",                     // SafetyMargin as set (0: default)
	"BURST":   "12",                     // Burst in seconds as set (0: default)
	"TBURST":  "13",                     // TokenBurst
	"LO":      "13",                     // provider-reported lowered bucket limits, 14..17
	"LOM":     "18",                     // when a lowering is forgotten
	"LV":      "18",                     // bucket levels, 19..22
	"BK":      "22",                     // booked by tickets, 23..26
	"LAST":    "27",                     // when the levels were last refilled
	"DU":      "27",                     // used today: requests, tokens (28, 29)
	"DE":      "30",                     // end of the day window (0: pending)
	"G":       "30",                     // cumulative granted, 31..37
	"NL":      "38",                     // live leases
	"NT":      "39",                     // booked tickets
	"NE":      "40",                     // lower bound of the next lease expiry (0: none)
	"MX":      "41",                     // upper bound of every lease and ticket expiry
	"LK":      "42",                     // expiry given to the lease key
	"TK":      "43",                     // expiry given to the ticket keys
	"BLK":     strconv.Itoa(stateBlock), // scope block: present, then reason, until, detail, half-open, probing (45..49)
	"CAP":     "49",                     // effective capacity, 50..56 (0: unlimited)
	"RATE":    "56",                     // bucket refill per second, 57..60
	"TE":      "61",                     // next ticket lapse (0: none)
	"WD":      "62",                     // latest RetryAt handed out: releases are announced until then
	"SF":      "63",                     // StandardFloor
	"BF":      "64",                     // BulkFloor
	"AG":      "65",                     // AgingAfter in microseconds (0: no aging)
	"BC":      "65",                     // booked by ticket class (capacity.Class c, 0..2): 66 + c*NB .. 69 + c*NB
	"NSTATE":  strconv.Itoa(stateFields),

	// STATE_VERSION is the first byte of a stored state (an earlier
	// version's msgpack state is dropped as after a data loss; anything else
	// is an error). STATE_FMT is the struct format of its fields.
	"STATE_VERSION": "2",
	"STATE_FMT":     stateFormat(stateFields, stateEpoch, stateSig, stateBlock+3),

	// KEYS of a scope script, as in keys.go (1-based).
	"K_EPOCH":   strconv.Itoa(keyEpoch + 1),
	"K_CB":      strconv.Itoa(keyCredBlock + 1),
	"K_STATE":   strconv.Itoa(keyState + 1),
	"K_LEASES":  strconv.Itoa(keyLeases + 1),
	"K_TICKETS": strconv.Itoa(keyTickets + 1),
	"K_TEXP":    strconv.Itoa(keyTicketExp + 1),
	"K_TAT":     strconv.Itoa(keyTicketAt + 1),

	"DENY_CAPACITY": strconv.Itoa(int(capacity.DenyCapacity)),
	"DENY_BLOCKED":  strconv.Itoa(int(capacity.DenyBlocked)),
	"DENY_DEADLINE": strconv.Itoa(int(capacity.DenyDeadline)),
	"DENY_DAILY":    strconv.Itoa(int(capacity.DenyDailyQuota)),
	"DENY_TICKET":   strconv.Itoa(int(capacity.DenyTicket)),
	"INFLIGHT":      strconv.Itoa(int(capacity.InFlight)), // as a capacity.Dimension

	"NB":               strconv.Itoa(int(capacity.Tokens) + 1),
	"ND":               strconv.Itoa(capacity.NumDimensions),
	"EPS":              "1e-6", // as capacity's epsilon
	"SLACK_US":         strconv.FormatInt(slack.Microseconds(), 10),
	"SLACK_MS":         strconv.FormatInt(slack.Milliseconds(), 10),
	"LOWERED_MEMORY":   strconv.FormatInt(LoweredLimitMemory.Microseconds(), 10),
	"HALF_OPEN_MEMORY": strconv.FormatInt(HalfOpenMemory.Microseconds(), 10),
	"DEF_MARGIN":       strconv.FormatFloat(capacity.DefaultSafetyMargin, 'g', -1, 64),
	"DEF_BURST":        strconv.FormatFloat(capacity.DefaultBurst.Seconds(), 'g', -1, 64),
}

// The state fields Go needs to know: the three strings (the epoch, the
// limits signature and the block's detail, at stateBlock+3) and the count.
const (
	stateEpoch  = 1
	stateSig    = 3
	stateBlock  = 44
	stateFields = 77
)

// stateFormat is the struct format of a state of n fields: doubles, but a
// zero-terminated string at each of the (1-based) positions strs.
func stateFormat(n int, strs ...int) string {
	f := []byte(strings.Repeat("d", n))
	for _, i := range strs {
		f[i-1] = 's'
	}
	return string(f)
}

var constant = regexp.MustCompile(`\$[A-Z_]+`)

// render writes the layout's constants into a script, then unrolls the
// loops marked for it. A name it does not know stays as is and fails to
// compile in Redis (and in TestScriptsRender).
func render(src string) string {
	src = constant.ReplaceAllStringFunc(src, func(m string) string {
		if v, ok := layout[m[1:]]; ok {
			return v
		}
		return m
	})
	return unroll(src)
}

// unrollable is a loop marked for unrolling: "for v = 1, N do -- unroll"
// on a line of its own, closed by "end" at the same indentation.
var unrollable = regexp.MustCompile(`^(\s*)for ([a-z]\w*) = 1, (\d+) do -- unroll$`)

// unroll replaces each marked loop by N copies of its body in do ... end
// blocks, with the loop variable written as 1, 2, ... N: Lua then folds
// S[50 + 1] to S[51] when it compiles the script, and the copies run
// without the loop's own instructions. Every script runs its hot loops for
// each operation, and Lua 5.1 pays for each instruction. The body must not
// use the variable's name for anything else (it is replaced as a word) and
// must not break out of the loop.
func unroll(src string) string {
	lines := strings.Split(src, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		m := unrollable.FindStringSubmatch(lines[i])
		if m == nil {
			out = append(out, lines[i])
			continue
		}
		indent, name := m[1], m[2]
		n, _ := strconv.Atoi(m[3])
		end := i + 1
		for end < len(lines) && lines[end] != indent+"end" {
			end++
		}
		if end == len(lines) {
			// Unclosed: leave the loop as it is; Redis reports the script.
			out = append(out, lines[i])
			continue
		}
		word := regexp.MustCompile(`\b` + name + `\b`)
		for k := 1; k <= n; k++ {
			out = append(out, indent+"do")
			for _, l := range lines[i+1 : end] {
				out = append(out, word.ReplaceAllString(l, strconv.Itoa(k)))
			}
			out = append(out, indent+"end")
		}
		i = end
	}
	return strings.Join(out, "\n")
}

// numbers are a script's numeric arguments packed as little-endian float64s,
// read with one struct.unpack('<d...'): much cheaper in Lua than tonumber of
// each (glibc strtod). A float64 holds an integer exactly below 2^53, and
// rounds a larger one to the nearest, as tonumber would.
type numbers []byte

func (n numbers) add(x int64) numbers {
	return binary.LittleEndian.AppendUint64(n, math.Float64bits(float64(x)))
}

func (n numbers) addFloat(f float64) numbers {
	return binary.LittleEndian.AppendUint64(n, math.Float64bits(f))
}

func (n numbers) addBool(b bool) numbers {
	if b {
		return n.add(1)
	}
	return n.add(0)
}

// The ops script reads the seven charges of an operation by name.
const _ = uint(capacity.NumDimensions-7) + uint(7-capacity.NumDimensions)
