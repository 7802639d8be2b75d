package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/capacity"
)

// unblockResult is the outcome of `tollgate unblock`, its -json line.
type unblockResult struct {
	Scope string `json:"scope"`
	// Credential is the credential key whose block was lifted too (-credential).
	Credential string `json:"credential,omitempty"`
	// Lifted are the blocks that were in force ("cooldown for 42s").
	Lifted []string `json:"lifted"`
	// Empty, if set, says why nothing was lifted: the store has no scopes
	// under the prefix.
	Empty string `json:"empty,omitempty"`
}

const unblockUsage = `usage: tollgate unblock [flags] SCOPE

Lifts the block of SCOPE in the Redis store, at once and for every worker: a
cooldown after a 429, a quota block, an open breaker. SCOPE is a scope key as
'tollgate status' prints it: provider/limit-group/credential[/region], for
example openai/gpt-4o/team-a.

With -credential it also lifts the block of SCOPE's credential (a rejected
API key), which holds every scope on that credential.

Unblock when the reason is gone (the quota was raised, the key replaced) or
the block is wrong. A block whose reason remains comes back with the next
failure. A SCOPE the store has no state for fails and names the scopes it
has; a store with no scopes at all under -prefix exits 3.

examples:
  tollgate unblock openai/gpt-4o/team-a
  tollgate unblock -credential -json anthropic/claude-sonnet-4-5/team-b
  tollgate unblock -redis node1:6379,node2:6379 openai/gpt-4o/team-a   # on a Cluster

flags:
`

func unblock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("unblock", unblockUsage, stderr, true)
	var rf redisFlags
	rf.register(fs)
	credential := fs.Bool("credential", false, "also lift the block of SCOPE's credential (every scope on it)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object (unblockResult: scope, credential, lifted)")
	// Flags may come before or after SCOPE.
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	key := fs.Arg(0)
	if fs.NArg() > 0 {
		if err := parseFlags(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	if key == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "tollgate unblock: want exactly one SCOPE")
		fs.Usage()
		return errUsage
	}
	sc, err := capacity.ParseScopeKey(key)
	if err == nil {
		err = sc.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate unblock: %v\n", err)
		return errUsage
	}

	ctx, cancel := context.WithTimeout(ctx, rf.timeout)
	defer cancel()
	store, release, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer release()
	scopes, err := store.Scopes(ctx)
	if err != nil {
		return err
	}
	// A scope the store has no state for is a typo, unless it is here to
	// name a blocked credential whose scopes have all gone quiet.
	known := slices.ContainsFunc(scopes, func(s capacity.Scope) bool { return s.Key() == sc.Key() })
	// empty reports an empty store, with -json as a result.
	empty := func(e *emptyError) error {
		if *asJSON {
			if err := writeJSON(stdout, unblockResult{Scope: sc.Key(), Lifted: []string{}, Empty: e.reason}); err != nil {
				return err
			}
		}
		return e
	}
	snap, err := store.Snapshot(ctx, sc) // read-only, also for a scope without state
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", sc.Key(), err)
	}
	if !known && !*credential {
		for _, b := range snap.Blocks {
			if b.Credential {
				return fmt.Errorf("%w %s: %s has no state for it under prefix %q, but its credential %s is blocked (%s): add -credential to lift that",
					errUnknownScope, sc.Key(), rf.where(), rf.prefix, sc.CredentialKey(), blockString(b, snap.Now))
			}
		}
		if len(scopes) == 0 {
			return empty(rf.empty(ctx, "no scopes", "nothing to unblock (state expires after a scope goes idle)"))
		}
		return unknownScope(sc, &rf, scopes)
	}
	res := unblockResult{Scope: sc.Key(), Lifted: []string{}}
	if *credential {
		res.Credential = sc.CredentialKey()
	}
	for _, b := range snap.Blocks {
		if !b.Credential || *credential {
			res.Lifted = append(res.Lifted, blockString(b, snap.Now))
		}
	}
	if !known && len(res.Lifted) == 0 {
		if len(scopes) == 0 {
			return empty(rf.empty(ctx, "no scopes and no block of credential "+sc.CredentialKey(), "nothing to unblock"))
		}
		return unknownScope(sc, &rf, scopes)
	}
	if err := store.Unblock(ctx, sc, false); err != nil {
		return fmt.Errorf("unblock %s: %w", sc.Key(), err)
	}
	if *credential {
		if err := store.Unblock(ctx, sc, true); err != nil {
			return fmt.Errorf("unblock credential %s: %w", sc.CredentialKey(), err)
		}
	}
	if *asJSON {
		return writeJSON(stdout, res)
	}
	what := sc.Key()
	if *credential {
		what += " and credential " + sc.CredentialKey()
	}
	if len(res.Lifted) == 0 {
		_, err = fmt.Fprintf(stdout, "%s: no block to lift\n", what)
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: lifted %s\n", what, strings.Join(res.Lifted, ", "))
	return err
}

// errUnknownScope is returned for a scope the store has no state for.
var errUnknownScope = errors.New("unknown scope")

// unknownScope explains that sc is not in the store, naming the scopes that
// are (up to ten).
func unknownScope(sc capacity.Scope, rf *redisFlags, scopes []capacity.Scope) error {
	keys := make([]string, 0, len(scopes))
	for _, s := range scopes {
		keys = append(keys, s.Key())
	}
	slices.Sort(keys)
	if len(keys) > 10 {
		keys = append(keys[:10], "...")
	}
	return fmt.Errorf("%w %s: %s has no state for it under prefix %q; known scopes: %s",
		errUnknownScope, sc.Key(), rf.where(), rf.prefix, strings.Join(keys, ", "))
}
