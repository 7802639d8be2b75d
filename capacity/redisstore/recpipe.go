package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// recExchange is lua/exchange.lua, the records engine's one script.
var recExchange = func() *redis.Script {
	src, err := luaFiles.ReadFile("lua/exchange.lua")
	if err != nil {
		panic("redisstore: lua/exchange.lua: " + err.Error()) // embedded: a build defect
	}
	return redis.NewScript(string(src))
}()

// recPipeMax is the most exchanges one pipeline sends.
const recPipeMax = 256

// recPipe sends a Store's exchanges: those queued while one pipeline is in
// flight go out together as the next, so the scopes of a busy worker share
// their round trips. A goroutine sends while exchanges are queued, and
// ends when none is.
type recPipe struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	queue   []*recCall
	sending bool
}

// recCall is an exchange waiting in the queue, and its reply. One may be
// sent again once its reply came (recScope.out): done has room for the
// one signal a send waits for.
type recCall struct {
	recCommand
	raw  []string
	err  error
	done chan struct{}
}

// newRecCall returns a call of cmd, ready to send.
func newRecCall(cmd recCommand) *recCall {
	return &recCall{recCommand: cmd, done: make(chan struct{}, 1)}
}

// send queues an exchange and waits for its reply. ctx is not the
// caller's: an exchange once queued is sent, and its reply applied, even if
// the caller gives up (recEngine.do).
func (p *recPipe) send(ctx context.Context, c *recCall) ([]string, error) {
	p.mu.Lock()
	p.queue = append(p.queue, c)
	start := !p.sending
	p.sending = true
	p.mu.Unlock()
	if start {
		go p.run(ctx)
	}
	<-c.done
	return c.raw, c.err
}

// run sends the queued exchanges, up to recPipeMax in one pipeline, until
// none is left.
func (p *recPipe) run(ctx context.Context) {
	var cmds []*redis.StringSliceCmd
	for {
		p.mu.Lock()
		n := min(len(p.queue), recPipeMax)
		if n == 0 {
			p.sending = false
			p.mu.Unlock()
			return
		}
		batch := p.queue[:n:n]
		p.queue = append([]*recCall(nil), p.queue[n:]...)
		p.mu.Unlock()

		pipe := p.rdb.Pipeline()
		cmds = cmds[:0]
		for _, c := range batch {
			// Read as strings straight away: a reply read generically
			// is boxed value by value, then copied.
			cmd := redis.NewStringSliceCmd(ctx, c.cmd...)
			_ = pipe.Process(ctx, cmd)
			cmds = append(cmds, cmd)
		}
		_, _ = pipe.Exec(ctx)
		for i, c := range batch {
			c.raw, c.err = cmds[i].Result()
			if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
				// Redis restarted or failed over since the script was
				// loaded: EVAL loads it again.
				c.raw, c.err = recExchange.Eval(ctx, p.rdb, c.keys, c.args()...).StringSlice()
			}
			c.done <- struct{}{}
		}
	}
}
