package capacity

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestTicketBook: through bookings, moves (time, expiry, place in the fair
// order) and removals, a ticketBook answers every question as sorting a
// plain map of the same tickets would, and a clone keeps its tickets
// whatever the original does after.
func TestTicketBook(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	rapid.Check(t, func(rt *rapid.T) {
		b := newTicketBook()
		want := map[string]Ticket{}
		var clone ticketBook
		var cloned map[string]Ticket
		draw := func(call string) Ticket {
			at := base.Add(time.Duration(rapid.IntRange(0, 50).Draw(rt, "at")) * time.Millisecond)
			return Ticket{Call: call, At: at, Expires: at.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "grace")) * time.Millisecond),
				Rank: rapid.IntRange(0, 2).Draw(rt, "rank"), Finish: float64(rapid.IntRange(0, 10).Draw(rt, "finish"))}
		}
		for range rapid.IntRange(1, 80).Draw(rt, "steps") {
			call := fmt.Sprint("c", rapid.IntRange(0, 12).Draw(rt, "call"))
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				tk := draw(call)
				b.put(tk)
				want[call] = tk
			case 2:
				got, ok := b.remove(call)
				old, had := want[call]
				require.Equal(rt, had, ok)
				require.Equal(rt, old, got)
				delete(want, call)
			case 3:
				clone, cloned = b.clone(), maps.Clone(want)
			}
			checkTicketBook(rt, &b, want, base)
		}
		if cloned != nil {
			checkTicketBook(rt, &clone, cloned, base)
		}
	})
}

// checkTicketBook compares every answer of b with what sorting want gives.
func checkTicketBook(t require.TestingT, b *ticketBook, want map[string]Ticket, base time.Time) {
	require.Equal(t, len(want), b.len())
	list := make([]Ticket, 0, len(want))
	for _, tk := range want {
		list = append(list, tk)
		got, ok := b.get(tk.Call)
		require.True(t, ok)
		require.Equal(t, tk, got)
	}
	calls := func(tks []Ticket) []string {
		out := []string{}
		for _, tk := range tks {
			out = append(out, tk.Call)
		}
		return out
	}

	// The order they are due in: higher ranks first, then by finish, then
	// by call.
	sort.Slice(list, func(i, j int) bool {
		a, c := list[i], list[j]
		switch {
		case a.Rank != c.Rank:
			return a.Rank > c.Rank
		case a.Finish != c.Finish:
			return a.Finish < c.Finish
		}
		return a.Call < c.Call
	})
	for _, n := range []int{0, 1, 3, len(list), len(list) + 1} {
		require.Equal(t, calls(list[:min(n, len(list))]), calls(b.first(n)), "first %d", n)
	}
	for i, tk := range list {
		for _, limit := range []int{1, 3, len(list)} {
			require.Equal(t, min(i, limit), b.place(tk.Call, limit), "place of %s, up to %d", tk.Call, limit)
		}
	}

	// By time (µs), then by call; the latest first backwards.
	sort.Slice(list, func(i, j int) bool {
		a, c := micros(time.Duration(list[i].At.UnixNano())), micros(time.Duration(list[j].At.UnixNano()))
		if a != c {
			return a < c
		}
		return list[i].Call < list[j].Call
	})
	var byTime, latest []Ticket
	b.byTime(func(tk Ticket) bool { byTime = append(byTime, tk); return true })
	b.latest(func(tk Ticket) bool { latest = append(latest, tk); return true })
	require.Equal(t, calls(list), calls(byTime))
	slices.Reverse(latest)
	require.Equal(t, calls(list), calls(latest))

	// Lapsed by a time, by expiry.
	sort.Slice(list, func(i, j int) bool {
		if !list[i].Expires.Equal(list[j].Expires) {
			return list[i].Expires.Before(list[j].Expires)
		}
		return list[i].Call < list[j].Call
	})
	if len(list) == 0 {
		require.True(t, b.nextExpiry().IsZero())
	} else {
		require.Equal(t, list[0].Expires, b.nextExpiry())
	}
	for _, ms := range []int{-1, 10, 30, 60} {
		now := base.Add(time.Duration(ms) * time.Millisecond)
		var lapsed []Ticket
		for _, tk := range list {
			if !now.Before(tk.Expires) {
				lapsed = append(lapsed, tk)
			}
		}
		require.Equal(t, calls(lapsed), calls(b.lapsed(now)), "lapsed by %v", now.Sub(base))
	}
	require.ElementsMatch(t, calls(list), calls(b.all()))
}
