package redisstore

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// recArgs are the exchange's arguments by name: list gives them in the
// order lua/exchange.lua reads them into its locals of the same names.
// What one does not send is left zero.
type recArgs struct {
	have, credHave int64  // the versions of the scope and of the credential's block the copy holds (-1: none)
	what           string // "read", "reload", "cred", or a write's decision time (unix ns)
	credTTL        int64  // how long the credential's block lives if this writes it (ms)
	// decided is when a write was decided, in Redis time as the copy
	// estimated it (unix ms), whatever Options.Clock says.
	decided int64

	// A write's: the blob, the log entry, how long the scope's keys live
	// (ms), the messages to publish (recNotices), the credential's block
	// (recCredArg), and the changed records, each name with its value
	// (nil deletes).
	blob         []byte
	entry        string
	ttl          int64
	release, due string
	cred         string
	names        []string
	values       [][]byte
}

// recArgsFixed is the number of the exchange's arguments before the
// changed records (FIRST_RECORD - 1 in lua/exchange.lua).
const recArgsFixed = 15

// recConstants are the engine's constants among the exchange's arguments
// (ARGV 4 to 7), boxed once.
var recConstants = []any{recLogLength, recReadAtOnce, recRecordsPerWrite, recWriteMaxAge.Milliseconds()}

// recCommandHead returns the start of the exchange's EVALSHA command on
// keys: the script and the keys, boxed once for every command on them.
func recCommandHead(keys []string) []any {
	head := []any{"evalsha", recExchange.Hash(), len(keys)}
	for _, k := range keys {
		head = append(head, k)
	}
	return head
}

// command returns the exchange whose command starts with head (on keys)
// with a's arguments, in the script's order and with the engine's
// constants, as one EVALSHA command: built once, in one slice, for the
// pipeline to send as it is. The slice is buf's (emptied first) if it has
// the room, else made.
func (a *recArgs) command(buf, head []any, keys []string) recCommand {
	cmd := slices.Grow(buf[:0], len(head)+recArgsFixed+2*len(a.names))
	cmd = append(cmd, head...)
	cmd = append(cmd, a.have, a.credHave, a.what)
	cmd = append(cmd, recConstants...)
	cmd = append(cmd, a.credTTL, a.decided, a.blob, a.entry, a.ttl, a.release, a.due, a.cred)
	for i, name := range a.names {
		cmd = append(cmd, name, a.values[i])
	}
	return recCommand{cmd: cmd, keys: keys}
}

// recCommand is one exchange as its EVALSHA command, and its keys.
type recCommand struct {
	cmd  []any
	keys []string
}

// args returns the script's arguments (ARGV) in c.
func (c recCommand) args() []any { return c.cmd[3+len(c.keys):] }

// recMissed is the exchange's reply to a copy that missed writes
// (lua/exchange.lua).
type recMissed struct {
	time, version, last, credVersion int64 // Redis TIME and the last write's time in unix ns
	mode, blob                       string
	cred                             []byte // the credential's block; nil: none
	body, asked                      []string
}

// recMissedHead is the number of values before the body of a missed reply.
const recMissedHead = 10

// parseMissed reads a missed reply; one of another shape fails with
// ErrBadReply.
func parseMissed(raw []string) (recMissed, error) {
	bad := func(what string) (recMissed, error) {
		return recMissed{}, fmt.Errorf("%w: exchange: %s", ErrBadReply, what)
	}
	if len(raw) < recMissedHead || raw[0] != "missed" {
		return bad(fmt.Sprintf("a reply of %d values", len(raw)))
	}
	var nums [6]int64
	for i, at := range []int{1, 2, 3, 4, 7, 9} {
		n, err := strconv.ParseInt(raw[at], 10, 64)
		if err != nil {
			return bad(fmt.Sprintf("value %d is %q", at, raw[at]))
		}
		nums[i] = n
	}
	m := recMissed{time: nums[0]*1e9 + nums[1]*1e3, version: nums[2], last: nums[3], credVersion: nums[4],
		mode: raw[5], blob: raw[6]}
	if raw[8] != "" {
		m.cred = []byte(raw[8])
	}
	n := nums[5]
	if n < 0 || n > int64(len(raw)-recMissedHead) {
		return bad(fmt.Sprintf("a body of %d values in a reply of %d", n, len(raw)))
	}
	switch m.mode {
	case "same", "log", "all", "far":
	default:
		return bad(fmt.Sprintf("mode %q", m.mode))
	}
	m.body, m.asked = raw[recMissedHead:recMissedHead+n], raw[recMissedHead+n:]
	return m, nil
}

// recEntry encodes a write's records for the scope's log: names and
// values, each after its length (a deletion's value is empty), but the
// credential's block, which is kept apart.
func recEntry(fields map[string][]byte) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		if n != capacity.CredentialRecord {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	size := 0
	for _, n := range names {
		size += 2*binary.MaxVarintLen32 + len(n) + len(fields[n])
	}
	b := make([]byte, 0, size)
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendUvarint(b, uint64(len(fields[n])))
		b = append(b, fields[n]...)
	}
	return string(b)
}

// recParseEntry adds the records of log entry e to fields, later entries
// overwriting earlier ones; a deletion is a nil value.
func recParseEntry(e string, fields map[string][]byte) error {
	for len(e) > 0 {
		var parts [2]string
		for i := range parts {
			l, n := recUvarint(e)
			if n <= 0 || uint64(len(e)-n) < l {
				return fmt.Errorf("%w: exchange: a log entry cut short", ErrBadReply)
			}
			parts[i], e = e[n:n+int(l)], e[n+int(l):]
		}
		if parts[1] == "" {
			fields[parts[0]] = nil
		} else {
			fields[parts[0]] = []byte(parts[1])
		}
	}
	return nil
}

// recUvarint is binary.Uvarint of the start of s, read in place.
func recUvarint(s string) (uint64, int) {
	var buf [binary.MaxVarintLen64]byte
	return binary.Uvarint(buf[:copy(buf[:], s)])
}

// recNotices returns what a write at now announces on the scope's
// channel, in the messages notify.go reads: release (the instance id) if
// it released capacity while a denied call may come back on it, due if it
// brought tickets forward (their calls); "" for none.
func recNotices(ch capacity.Records, now time.Time, instance string) (release, due string) {
	if ch.Released && !ch.WaitersUntil.Before(now) {
		release = instance
	}
	if len(ch.Announced) > 0 {
		due = duePrefix + strings.Join(ch.Announced, " ")
	}
	return release, due
}

// recCredArg is the exchange's argument for the credential's block among
// changed records: "" unchanged, "-" deleted, else "+" and the block.
func recCredArg(fields map[string][]byte) string {
	v, ok := fields[capacity.CredentialRecord]
	switch {
	case !ok:
		return ""
	case v == nil:
		return "-"
	}
	return "+" + string(v)
}
