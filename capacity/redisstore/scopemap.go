package redisstore

import (
	"sync"

	"github.com/tollgate-dev/tollgate/capacity"
)

// scopeMap holds a value per scope for concurrent use: read on every
// operation, written once per scope. Unlike a sync.Map it takes the scope
// as it is, not boxed in an interface (an allocation each lookup).
type scopeMap[V any] struct {
	mu sync.RWMutex
	m  map[capacity.Scope]V
}

// get returns sc's value, made by fresh and kept if sc has none yet.
func (m *scopeMap[V]) get(sc capacity.Scope, fresh func() V) V {
	m.mu.RLock()
	v, ok := m.m[sc]
	m.mu.RUnlock()
	if ok {
		return v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.m[sc]; ok {
		return v
	}
	if m.m == nil {
		m.m = map[capacity.Scope]V{}
	}
	v = fresh()
	m.m[sc] = v
	return v
}

// each calls f with every value, holding the map's read lock: f must not
// call get.
func (m *scopeMap[V]) each(f func(V)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, v := range m.m {
		f(v)
	}
}
