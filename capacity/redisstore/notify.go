package redisstore

import (
	"container/list"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Released implements capacity.Notifier. Waiters on a scope form a local
// FIFO queue. A release on the scope (a settle, a release, an expired lease
// reclaimed; by this or any other worker, through one sharded pub/sub
// subscription per scope per Store) closes the channel of the waiter at the
// head of the queue only, and a waiter that is then granted while room is
// left wakes the next: a thousand waiters cost Redis one Reserve per release,
// not a thousand. stop closes the channel and leaves the queue.
func (s *Store) Released(sc capacity.Scope) (<-chan struct{}, func()) {
	if sc.Validate() != nil {
		// No channel for a scope whose name may hold a secret; Reserve
		// refuses it anyway.
		return make(chan struct{}), func() {}
	}
	return s.notify.released(s.keysFor(sc))
}

// notifier fans release messages out to local waiters.
type notifier struct {
	s      *Store
	queues sync.Map // scope key -> *waitQueue
	// perRelease is how many of a scope's waiters a release message wakes:
	// 1 with the scripts, whose grants pass the wake-up on while room is
	// left (Reserve); a batch's worth (recWakePerRelease) with the records
	// engine.
	perRelease int

	mu     sync.Mutex
	subs   map[string]*subscription // by credential key: one connection per hash slot
	closed bool

	dueMu sync.Mutex
	due   map[dueKey]chan struct{} // calls waiting for their tickets (TicketDue)
}

// dueKey names one call's ticket on one scope.
type dueKey struct{ scopeKey, call string }

// waitQueue is one scope's local waiters, oldest first.
type waitQueue struct {
	credKey string
	n       atomic.Int64 // len(waiters), read without the lock
	mu      sync.Mutex
	waiters list.List // of *waiter
}

type waiter struct {
	ch   chan struct{}
	elem *list.Element
	done bool
}

// subscription is one PubSub connection for the scopes of a credential.
type subscription struct {
	channels map[string]string // channel -> scope key
	add      chan string
	ctx      context.Context
	cancel   context.CancelFunc
}

func newNotifier(s *Store) *notifier {
	return &notifier{s: s, perRelease: 1, subs: make(map[string]*subscription), due: make(map[dueKey]chan struct{})}
}

// queue returns k's wait queue and whether this call made it: the caller
// that made it subscribes the scope's channel once it has registered what
// it waits for, so that the subscription's confirmation, which wakes the
// head of the queue (a release may have been missed while it was made),
// finds it there.
func (n *notifier) queue(k *scopeKeys) (*waitQueue, bool) {
	if q, ok := n.queues.Load(k.scopeKey); ok {
		return q.(*waitQueue), false
	}
	q, loaded := n.queues.LoadOrStore(k.scopeKey, &waitQueue{credKey: k.credKey})
	return q.(*waitQueue), !loaded
}

func (n *notifier) released(k *scopeKeys) (<-chan struct{}, func()) {
	q, made := n.queue(k)
	w := &waiter{ch: make(chan struct{})}
	q.mu.Lock()
	w.elem = q.waiters.PushBack(w)
	q.n.Add(1)
	q.mu.Unlock()
	if made {
		n.subscribe(k)
	}
	return w.ch, func() {
		q.mu.Lock()
		q.end(w)
		q.mu.Unlock()
	}
}

// end closes w and takes it off the queue. It requires q.mu.
func (q *waitQueue) end(w *waiter) {
	if w.done {
		return
	}
	w.done = true
	q.waiters.Remove(w.elem)
	q.n.Add(-1)
	close(w.ch)
}

// wake closes the channels of the first count waiters on the scope; count < 0
// wakes every one.
func (n *notifier) wake(scopeKey string, count int) {
	v, ok := n.queues.Load(scopeKey)
	if !ok {
		return
	}
	q := v.(*waitQueue)
	if q.n.Load() == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for count != 0 {
		e := q.waiters.Front()
		if e == nil {
			return
		}
		q.end(e.Value.(*waiter))
		count--
	}
}

// wakeCredential wakes the head of every queue on a credential (its state
// was lost or the subscription came back: what waiters wait for changed).
func (n *notifier) wakeCredential(credKey string) {
	n.queues.Range(func(key, v any) bool {
		if v.(*waitQueue).credKey == credKey {
			n.wake(key.(string), 1)
		}
		return true
	})
}

// subscribe makes sure k's release channel is subscribed; the subscription is
// made in the background, so Released never waits for Redis.
func (n *notifier) subscribe(k *scopeKeys) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	sub := n.subs[k.credKey]
	if sub == nil {
		ctx, cancel := context.WithCancel(context.Background())
		sub = &subscription{channels: map[string]string{k.channel: k.scopeKey}, add: make(chan string, 64), ctx: ctx, cancel: cancel}
		n.subs[k.credKey] = sub
		go n.run(ctx, sub)
		return
	}
	if _, ok := sub.channels[k.channel]; !ok {
		sub.channels[k.channel] = k.scopeKey
		go func() {
			select {
			case sub.add <- k.channel:
			case <-sub.ctx.Done():
			}
		}()
	}
}

// run owns the subscription of one credential until ctx ends. go-redis
// reconnects and resubscribes by itself after an outage; when a Cluster
// master drops the subscription (the credential's slot moved: the server
// sends SUNSUBSCRIBE) or never confirms it (it went to a master that no
// longer owns the slot), run asks a Cluster client to reload its slot map
// and subscribes again on a new connection, backing off up to
// maxResubscribeWait.
func (n *notifier) run(ctx context.Context, sub *subscription) {
	for retry := 0; ctx.Err() == nil; retry++ {
		if retry > 0 {
			if r, ok := n.s.rdb.(interface{ ReloadState(context.Context) }); ok {
				r.ReloadState(ctx)
			}
			wait := min(resubscribeWait<<min(retry-1, 8), maxResubscribeWait)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if n.listen(ctx, sub) {
			retry = 0
		}
	}
}

// Resubscription timing (notifier.run): a subscription not confirmed within
// confirmWait is made again after resubscribeWait, doubling up to
// maxResubscribeWait.
const (
	confirmWait        = 2 * time.Second
	resubscribeWait    = 50 * time.Millisecond
	maxResubscribeWait = 5 * time.Second
)

// listen subscribes sub's channels on one PubSub connection, adds channels
// and delivers messages until ctx ends, the server drops the subscription
// or does not confirm it within confirmWait. It reports whether the
// subscription was confirmed.
func (n *notifier) listen(ctx context.Context, sub *subscription) (confirmed bool) {
	n.mu.Lock()
	channels := make([]string, 0, len(sub.channels))
	for ch := range sub.channels {
		channels = append(channels, ch)
	}
	n.mu.Unlock()
	ps := n.s.rdb.SSubscribe(ctx, channels...)
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions()
	unconfirmed := time.NewTimer(confirmWait)
	defer unconfirmed.Stop()
	for {
		select {
		case <-ctx.Done():
			return confirmed
		case <-unconfirmed.C:
			if !confirmed {
				return false
			}
		case ch := <-sub.add:
			_ = ps.SSubscribe(ctx, ch) // recorded and resubscribed on reconnect even if this fails
		case m, ok := <-msgs:
			if !ok {
				return confirmed
			}
			if m, ok := m.(*redis.Subscription); ok {
				switch m.Kind {
				case "ssubscribe":
					confirmed = true
				case "sunsubscribe": // by the server: this store never unsubscribes
					return confirmed
				}
			}
			n.deliver(sub, m)
		}
	}
}

func (n *notifier) deliver(sub *subscription, m any) {
	var channel string
	switch m := m.(type) {
	case *redis.Message:
		if calls, ok := strings.CutPrefix(m.Payload, duePrefix); ok {
			n.mu.Lock()
			scopeKey := sub.channels[m.Channel]
			n.mu.Unlock()
			n.ticketsDue(scopeKey, strings.Fields(calls))
			return
		}
		if m.Payload == n.s.id {
			return // this instance already woke its own waiters
		}
		channel = m.Channel
	case *redis.Subscription:
		if !strings.HasPrefix(m.Kind, "ssubscribe") {
			return
		}
		channel = m.Channel // (re)subscribed: releases may have been missed
	default:
		return
	}
	n.mu.Lock()
	scopeKey, ok := sub.channels[channel]
	n.mu.Unlock()
	if ok {
		n.wake(scopeKey, n.perRelease)
	}
}

// close ends every subscription and wakes every waiter.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	for _, sub := range n.subs {
		sub.cancel()
	}
	n.subs = map[string]*subscription{}
	n.mu.Unlock()
	n.queues.Range(func(key, _ any) bool {
		n.wake(key.(string), -1)
		return true
	})
}

// duePrefix begins a message that lists the calls whose tickets came due
// early (lua/state.lua, save), separated by spaces.
const duePrefix = "due "

// TicketDue implements capacity.TicketNotifier: a script that brings a
// ticket due early announces its call on the scope's channel.
func (s *Store) TicketDue(sc capacity.Scope, call string) (<-chan struct{}, func()) {
	if sc.Validate() != nil {
		return make(chan struct{}), func() {}
	}
	return s.notify.ticketDue(s.keysFor(sc), call)
}

func (n *notifier) ticketDue(k *scopeKeys, call string) (<-chan struct{}, func()) {
	_, made := n.queue(k)
	key := dueKey{k.scopeKey, call}
	n.dueMu.Lock()
	defer n.dueMu.Unlock()
	ch, ok := n.due[key]
	if !ok {
		ch = make(chan struct{})
		n.due[key] = ch
	}
	if made {
		n.subscribe(k) // the scope's channel announces the ticket
	}
	return ch, func() {
		n.dueMu.Lock()
		defer n.dueMu.Unlock()
		if n.due[key] == ch {
			delete(n.due, key)
		}
	}
}

// ticketsDue wakes the calls of scopeKey whose tickets came due.
func (n *notifier) ticketsDue(scopeKey string, calls []string) {
	n.dueMu.Lock()
	defer n.dueMu.Unlock()
	for _, c := range calls {
		key := dueKey{scopeKey, c}
		if ch, ok := n.due[key]; ok {
			close(ch)
			delete(n.due, key)
		}
	}
}
