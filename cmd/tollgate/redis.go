package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
)

// redisFlags are the flags of the commands that use the Redis store.
type redisFlags struct {
	addr, user, prefix string
	tls                bool
}

// register defines -redis, -user, -tls and -prefix on fs.
func (f *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "redis", envOr("TOLLGATE_REDIS_ADDR", "127.0.0.1:6379"), "Redis address host:port (env TOLLGATE_REDIS_ADDR)")
	fs.StringVar(&f.user, "user", os.Getenv("TOLLGATE_REDIS_USER"), "Redis ACL user (env TOLLGATE_REDIS_USER; password from TOLLGATE_REDIS_PASSWORD)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS")
	fs.StringVar(&f.prefix, "prefix", redisstore.DefaultPrefix, "key prefix of the store")
}

// open returns the store at the flags' address once Redis has answered a
// PING, so a wrong address fails with an error naming it. release closes
// the store and its client.
func (f *redisFlags) open(ctx context.Context) (store *redisstore.Store, release func(), err error) {
	opts := &redis.Options{Addr: f.addr, Username: f.user, Password: os.Getenv("TOLLGATE_REDIS_PASSWORD")}
	if f.tls {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("cannot reach Redis at %q (set -redis or TOLLGATE_REDIS_ADDR): %w", f.addr, err)
	}
	store, err = redisstore.New(rdb, redisstore.Options{Prefix: f.prefix})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return store, func() { _ = store.Close(); _ = rdb.Close() }, nil
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
