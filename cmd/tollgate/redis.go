package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redisscan"
)

// DefaultTimeout is the default of -timeout.
const DefaultTimeout = 10 * time.Second

// redisFlags are the connection flags every command on the Redis store
// shares (status, unblock, advise, cost). A command registers them on its
// flag set, parses, then opens the store:
//
//	var rf redisFlags
//	rf.register(fs)
//	if err := parseFlags(fs, args); err != nil {
//		return err
//	}
//	ctx, cancel := context.WithTimeout(ctx, rf.timeout)
//	defer cancel()
//	store, release, err := rf.open(ctx) // errUsage-wrapped for bad flags; names the address if unreachable
//	if err != nil {
//		return err
//	}
//	defer release()
//
// It names where it read in its messages with rf.where() and rf.prefix,
// in its -json output with rf.source(), and returns rf.empty(...) when the
// store holds nothing to show (exit 3).
type redisFlags struct {
	// addr is -redis as given: one address, or several, comma-separated
	// (Cluster seed nodes, or Sentinels with -sentinel-master).
	addr string
	// cluster (-cluster) asks for a Redis Cluster client even with one
	// address; sentinelMaster (-sentinel-master) for a Sentinel failover
	// client of that master, addr naming the Sentinels.
	cluster        bool
	sentinelMaster string
	user           string
	tls            bool
	prefix         string
	// timeout (-timeout) bounds reaching Redis, each command and, for
	// status -watch, each refresh.
	timeout time.Duration

	rdb redis.UniversalClient // the client of the store open returned
}

// connectionHelp documents the connection flags, their environment
// variables and the exit codes, for every command's -h.
const connectionHelp = `
Connection (every command on the Redis store): -redis takes one address, or
several, comma-separated: with -cluster (implied by several addresses) they
are Redis Cluster seed nodes, with -sentinel-master NAME they are Sentinels.
The password comes from TOLLGATE_REDIS_PASSWORD (Sentinels':
TOLLGATE_SENTINEL_PASSWORD), never from a flag.

Exit status: 0 ok, 1 failure (Redis unreachable within -timeout, a command
error), 2 usage (a bad flag or argument), 3 empty (nothing stored under
-prefix: the message, or with -json the "empty" field, says why).
`

// register defines the connection flags on fs: -redis, -cluster,
// -sentinel-master, -user, -tls, -prefix and -timeout, with defaults from
// the environment.
func (f *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "redis", envOr("TOLLGATE_REDIS_ADDR", "127.0.0.1:6379"),
		"where Redis is: `addr[,addr...]`, each host:port; several: Cluster seed nodes, or Sentinels with -sentinel-master (env TOLLGATE_REDIS_ADDR)")
	fs.BoolVar(&f.cluster, "cluster", envBool("TOLLGATE_REDIS_CLUSTER"), "connect to a Redis Cluster (implied by several -redis addresses; env TOLLGATE_REDIS_CLUSTER)")
	fs.StringVar(&f.sentinelMaster, "sentinel-master", os.Getenv("TOLLGATE_SENTINEL_MASTER"),
		"connect through Sentinels (the -redis addresses) to the master of this `name` (env TOLLGATE_SENTINEL_MASTER)")
	fs.StringVar(&f.user, "user", os.Getenv("TOLLGATE_REDIS_USER"), "Redis ACL `user` (env TOLLGATE_REDIS_USER; password from TOLLGATE_REDIS_PASSWORD)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS")
	fs.StringVar(&f.prefix, "prefix", redisstore.DefaultPrefix, "key `prefix` of the store (redisstore.Options.Prefix)")
	fs.DurationVar(&f.timeout, "timeout", DefaultTimeout, "bound on reaching Redis and on each read")
}

// addrs returns the addresses of -redis, trimmed, empty ones dropped.
func (f *redisFlags) addrs() []string {
	var out []string
	for a := range strings.SplitSeq(f.addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// mode returns the kind of deployment the flags name: "single",
// "cluster" or "sentinel".
func (f *redisFlags) mode() string {
	switch {
	case f.sentinelMaster != "":
		return "sentinel"
	case f.cluster || len(f.addrs()) > 1:
		return "cluster"
	}
	return "single"
}

// where names what the flags connect to, for messages: `Redis at "a"`,
// `Redis Cluster at "a,b"` or `Redis master "m" through Sentinels at "a,b"`.
func (f *redisFlags) where() string {
	addr := strings.Join(f.addrs(), ",")
	switch f.mode() {
	case "sentinel":
		return fmt.Sprintf("Redis master %q through Sentinels at %q", f.sentinelMaster, addr)
	case "cluster":
		return fmt.Sprintf("Redis Cluster at %q", addr)
	}
	return fmt.Sprintf("Redis at %q", addr)
}

// options returns the client options of the flags, for
// redis.NewUniversalClient, or an error wrapping errUsage that names the
// bad flag.
func (f *redisFlags) options() (*redis.UniversalOptions, error) {
	addrs := f.addrs()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: -redis is empty; want host:port[,host:port...]", errUsage)
	}
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("%w: -redis address %q: want host:port (%v)", errUsage, a, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("%w: -redis address %q: port %q is not a number from 1 to 65535", errUsage, a, port)
		}
	}
	if f.cluster && f.sentinelMaster != "" {
		return nil, fmt.Errorf("%w: -cluster and -sentinel-master exclude each other", errUsage)
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("%w: -timeout is %v; want > 0", errUsage, f.timeout)
	}
	o := &redis.UniversalOptions{
		Addrs:         addrs,
		Username:      f.user,
		Password:      os.Getenv("TOLLGATE_REDIS_PASSWORD"),
		MasterName:    f.sentinelMaster,
		IsClusterMode: f.cluster,
		DialTimeout:   f.timeout,
		ReadTimeout:   f.timeout,
		WriteTimeout:  f.timeout,
		// An operator waits at the prompt: a refused dial is reported in
		// a moment, not after go-redis's default 5 dials × 4 tries.
		MaxRetries:         1,
		DialerRetries:      2,
		DialerRetryTimeout: 100 * time.Millisecond,
	}
	if f.sentinelMaster != "" {
		o.SentinelPassword = os.Getenv("TOLLGATE_SENTINEL_PASSWORD")
	}
	if f.tls {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// dial returns a client of the flags once Redis has answered a PING
// within -timeout, so a wrong address fails with an error naming it and
// the cause.
func (f *redisFlags) dial(ctx context.Context) (redis.UniversalClient, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewUniversalClient(opts)
	pctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, f.unreachable(err)
	}
	return rdb, nil
}

// unreachable explains a failed PING: where, the cause, and a hint.
func (f *redisFlags) unreachable(err error) error {
	var ne net.Error
	cause := err.Error()
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		cause = fmt.Sprintf("no answer within %v (-timeout): %v", f.timeout, err)
	}
	hint := "check -redis or TOLLGATE_REDIS_ADDR"
	switch {
	case strings.Contains(cause, "cluster support disabled"):
		hint = "it is not a Cluster: drop -cluster and give one address"
	case strings.Contains(cause, "MOVED") || strings.Contains(cause, "CROSSSLOT"):
		hint = "it is a Cluster: add -cluster"
	case strings.Contains(cause, "NOAUTH") || strings.Contains(cause, "WRONGPASS"):
		hint = "check -user and TOLLGATE_REDIS_PASSWORD"
	case f.mode() == "sentinel":
		hint = "check -redis (the Sentinels' addresses) and -sentinel-master"
	}
	return fmt.Errorf("cannot reach %s: %s; %s", f.where(), cause, hint)
}

// open returns the store under -prefix once Redis has answered (see dial),
// and keeps its client for empty. release closes the store and its
// client. A flag error wraps errUsage.
func (f *redisFlags) open(ctx context.Context) (store *redisstore.Store, release func(), err error) {
	rdb, err := f.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	store, err = redisstore.New(rdb, redisstore.Options{Prefix: f.prefix})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	f.rdb = rdb
	return store, func() { _ = store.Close(); _ = rdb.Close() }, nil
}

// empty returns the emptyError of a store with nothing under -prefix:
// what is missing ("no scopes"), where, why that may be, and what to
// check, naming the prefixes Redis does hold tollgate state under, if any
// (after open; before, it names none). A command returns it, after
// printing its -json result with the reason in an "empty" field:
//
//	if len(rows) == 0 {
//		e := rf.empty(ctx, "no costs", "workers record what calls cost when they settle")
//		rep.Empty = e.Error() // -json
//		return e              // exit 3, the reason on stderr
//	}
func (f *redisFlags) empty(ctx context.Context, what, why string) *emptyError {
	hint := "check -prefix"
	if f.rdb != nil {
		if others := otherPrefixes(ctx, f.rdb, f.prefix); len(others) > 0 {
			hint = "prefixes with tollgate state: " + strings.Join(others, ", ") + "; check -prefix"
		}
	}
	return &emptyError{reason: fmt.Sprintf("%s in %s under prefix %q: %s; %s", what, f.where(), f.prefix, why, hint)}
}

// otherPrefixes returns the prefixes other than prefix under which Redis
// holds scope state, quoted and sorted, the first five and how many more,
// looking at a bounded number of keys (an operator's hint, not an
// inventory). Errors give none.
func otherPrefixes(ctx context.Context, rdb redis.UniversalClient, prefix string) []string {
	const most = 20_000 // keys looked at, per node and kind
	found := map[string]bool{}
	// {prefix:provider/credential}:state:scope-key, the scripts' state, or
	// :rec:scope-key, the records engine's (capacity/redisstore/keys.go).
	for _, kind := range []string{"state", "rec"} {
		_ = redisscan.Keys(ctx, rdb, "{*:*}:"+kind+":*", most, func(key string) {
			tag, _, ok := strings.Cut(strings.TrimPrefix(key, "{"), "}")
			if i := strings.LastIndex(tag, ":"); ok && i > 0 {
				found[tag[:i]] = true
			}
		})
	}
	delete(found, prefix)
	out := make([]string, 0, len(found))
	for p := range found {
		out = append(out, strconv.Quote(p))
	}
	slices.Sort(out)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return out
}

// parseFlags parses args into fs: flag.ErrHelp for -h, errUsage for a bad
// flag (fs has printed why).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errUsage
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// envBool reports whether environment variable k is a true value
// (strconv.ParseBool).
func envBool(k string) bool {
	v, _ := strconv.ParseBool(os.Getenv(k))
	return v
}
