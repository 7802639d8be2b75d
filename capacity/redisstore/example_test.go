package redisstore_test

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
)

// A store for many workers on one Redis. New does not contact Redis: the
// first call does, and while Redis cannot be reached the store refuses
// every call (FailClosed) unless it may fall back to a local share of
// each limit.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	store, err := redisstore.New(rdb, redisstore.Options{Prefix: "tollgate"})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	fmt.Println("store ready")

	// A fallback needs each worker's share of the limits.
	_, err = redisstore.New(rdb, redisstore.Options{OnUnavailable: redisstore.FallbackLocal})
	fmt.Println(err)
	// Output:
	// store ready
	// redisstore: invalid options: FallbackLocal needs FallbackFraction, at most 1 / the number of workers
}
