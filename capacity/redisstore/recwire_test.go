package redisstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecEntryRoundTrip: a log entry gives back the records it was made
// of, a deletion as nil, and the credential's block is left out of it.
func TestRecEntryRoundTrip(t *testing.T) {
	fields := map[string][]byte{"lc1": []byte("\x01lease"), "tc2": nil, "c": []byte("block"), "": []byte("x")}
	got := map[string][]byte{}
	require.NoError(t, recParseEntry(recEntry(fields), got))
	require.Equal(t, map[string][]byte{"lc1": []byte("\x01lease"), "tc2": nil, "": []byte("x")}, got)

	entry := recEntry(map[string][]byte{"lc1": []byte("value")})
	for cut := 1; cut < len(entry); cut++ {
		require.ErrorIs(t, recParseEntry(entry[:cut], map[string][]byte{}), ErrBadReply, "cut at %d", cut)
	}
}

// FuzzRecParseEntry: whatever a log entry holds, reading it never panics
// and fails only with ErrBadReply; what it reads makes an entry that reads
// back the same.
// Seeded from testdata/fuzz/FuzzRecParseEntry and entries of records.
func FuzzRecParseEntry(f *testing.F) {
	f.Add(recEntry(map[string][]byte{"lc1": []byte("\x01\x04c1#1"), "tc2": nil}))
	f.Add(recEntry(map[string][]byte{"": nil}))
	f.Add(strings.Repeat("\xff", 11))
	f.Fuzz(func(t *testing.T, entry string) {
		fields := map[string][]byte{}
		if err := recParseEntry(entry, fields); err != nil {
			if !errors.Is(err, ErrBadReply) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		delete(fields, "c") // the credential's block never goes in an entry
		again := map[string][]byte{}
		require.NoError(t, recParseEntry(recEntry(fields), again))
		require.Equal(t, fields, again)
	})
}

// FuzzParseMissed: whatever the exchange replies, reading it as a missed
// reply never panics and fails only with ErrBadReply; what it accepts has
// a known mode and a body and values within the reply.
// Seeded from testdata/fuzz/FuzzParseMissed and replies of each mode.
func FuzzParseMissed(f *testing.F) {
	f.Add("missed\x001800000000\x00123\x005\x001800000000000000000\x00log\x00blob\x003\x00block\x001\x00entry")
	f.Add("missed\x001800000000\x00123\x005\x000\x00all\x00blob\x000\x00\x002\x00lc1\x00v\x00asked")
	f.Add("missed\x001\x002\x003\x004\x00same\x00\x000\x00\x00-1")
	f.Add("ok\x005\x001")
	f.Fuzz(func(t *testing.T, joined string) {
		raw := strings.Split(joined, "\x00")
		m, err := parseMissed(raw)
		if err != nil {
			if !errors.Is(err, ErrBadReply) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		switch m.mode {
		case "same", "log", "all", "far":
		default:
			t.Fatalf("mode %q accepted", m.mode)
		}
		require.Equal(t, len(raw)-recMissedHead, len(m.body)+len(m.asked))
	})
}
