package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// poolFlag is status's -pool flag, name=member,member,... and repeatable:
// the workers' interceptor.Options.Pools, which the store does not hold.
type poolFlag map[string][]string

func (p poolFlag) String() string {
	var parts []string
	for name, members := range p {
		parts = append(parts, name+"="+strings.Join(members, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// Set implements flag.Value.
func (p poolFlag) Set(v string) error {
	name, list, ok := strings.Cut(v, "=")
	if !ok || name == "" || list == "" {
		return fmt.Errorf("want name=member,member,... (as in interceptor.Options.Pools), not %q", v)
	}
	if _, dup := p[name]; dup {
		return fmt.Errorf("pool %q given twice", name)
	}
	for _, m := range strings.Split(list, ",") {
		if m == "" {
			return fmt.Errorf("pool %q has an empty member name", name)
		}
		p[name] = append(p[name], m)
	}
	return nil
}

// poolStatus is one pool's members on one quota (provider, limit group,
// region): each member's scope, as the gate reads it when it picks a key.
type poolStatus struct {
	Pool string `json:"pool"`
	// Quota is provider/limit group[/region].
	Quota string `json:"quota"`
	// Usable is how many members are not out.
	Usable  int            `json:"usable"`
	Members []memberStatus `json:"members"`
}

// memberStatus is one member of a pool on one quota.
type memberStatus struct {
	Credential string `json:"credential"`
	Scope      string `json:"scope"`
	// State is "ok", "paused" (a cooldown, an open breaker, a probe in
	// flight: calls go to the others meanwhile) or "out" (a refused
	// credential, no access to the model, an exhausted quota: skipped
	// until Until).
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Detail string    `json:"detail,omitempty"`
	Until  time.Time `json:"until,omitzero"`
	// Used is capacity.Snapshot.Used: the largest fraction of a budget in
	// use (the gate prefers the least used).
	Used     float64 `json:"used"`
	InFlight int     `json:"in_flight"`
	Tickets  int     `json:"tickets"`

	left time.Duration // Until less the snapshot's time
}

// snapshotter reads a scope (capacity.Store's Snapshot).
type snapshotter interface {
	Snapshot(ctx context.Context, sc capacity.Scope) (capacity.Snapshot, error)
}

// poolsOf is the status of every pool of pools on each quota where one of
// its members has state among scopes, by pool then quota.
func poolsOf(ctx context.Context, store snapshotter, scopes []capacity.Scope, pools poolFlag) ([]poolStatus, error) {
	var names []string
	for name := range pools {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []poolStatus
	for _, name := range names {
		members := pools[name]
		quotas := map[string]capacity.Scope{} // quota → a scope of it, with no credential
		for _, sc := range scopes {
			for _, m := range members {
				if sc.Credential == m {
					q := sc
					q.Credential = ""
					quotas[quotaKey(q)] = q
				}
			}
		}
		var keys []string
		for k := range quotas {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps := poolStatus{Pool: name, Quota: k}
			for _, m := range members {
				sc := quotas[k]
				sc.Credential = m
				snap, err := store.Snapshot(ctx, sc)
				if err != nil {
					return nil, fmt.Errorf("snapshot of %s: %w", sc.Key(), err)
				}
				ms := memberOf(snap)
				if ms.State != "out" {
					ps.Usable++
				}
				ps.Members = append(ps.Members, ms)
			}
			out = append(out, ps)
		}
	}
	return out, nil
}

// quotaKey is provider/group[/region] of q.
func quotaKey(q capacity.Scope) string {
	k := string(q.Provider) + "/" + q.LimitGroup
	if q.Region != "" {
		k += "/" + q.Region
	}
	return k
}

// memberOf is the status of the member scope of snap.
func memberOf(snap capacity.Snapshot) memberStatus {
	ms := memberStatus{Credential: snap.Scope.Credential, Scope: snap.Scope.Key(), State: "ok",
		Used: snap.Used(), InFlight: len(snap.Leases), Tickets: len(snap.Tickets)}
	if b, ok := snap.OutBlock(); ok {
		ms.State, ms.Reason, ms.Detail, ms.Until, ms.left = "out", b.Reason.String(), b.Detail, b.Until, b.Until.Sub(snap.Now)
		if b.Reason == capacity.CredentialDisabled && !b.Credential {
			ms.Reason = "no_access"
		}
		return ms
	}
	if d := snap.Paused(); d > 0 {
		ms.State, ms.Until, ms.left = "paused", snap.Now.Add(d), d
		for _, b := range snap.Blocks {
			if b.Until.Equal(ms.Until) {
				ms.Reason, ms.Detail = b.Reason.String(), b.Detail
			}
		}
	}
	return ms
}

// printPools prints the pools' members, one line each.
func printPools(w io.Writer, pools []poolStatus) error {
	if len(pools) == 0 {
		_, err := fmt.Fprintln(w, "\nno member of the pools given has state in Redis (none used recently)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPOOL\tQUOTA\tUSABLE\tMEMBER\tSTATE\tUSED\tIN FLIGHT\tTICKETS")
	for _, p := range pools {
		for _, m := range p.Members {
			state := m.State
			if m.Reason != "" {
				state += ": " + m.Reason
			}
			if m.Detail != "" {
				state += " (" + m.Detail + ")"
			}
			if m.left > 0 {
				state += " for " + m.left.Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%.0f%%\t%d\t%d\n", p.Pool, p.Quota, p.Usable, len(p.Members), m.Credential, state, 100*m.Used, m.InFlight, m.Tickets)
		}
	}
	return tw.Flush()
}
