package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// reloading holds a value loaded from files and loads it again when any of
// their modification times changes, so rotated credentials (a Secret that
// cert-manager renews in place) take effect without a restart. A failed
// reload keeps the last good value and is tried again on the next get,
// since a rotation may be caught halfway (new certificate, old key).
type reloading[T any] struct {
	load  func() (T, error)
	files []string

	mu     sync.Mutex
	mtimes []time.Time
	val    T
	loaded bool
}

func newReloading[T any](load func() (T, error), files ...string) *reloading[T] {
	return &reloading[T]{load: load, files: files}
}

func (r *reloading[T]) get() (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	mtimes := make([]time.Time, len(r.files))
	var statErr error
	for i, f := range r.files {
		st, err := os.Stat(f)
		if err != nil {
			statErr = fmt.Errorf("stat %s: %w", f, err)
			break
		}
		mtimes[i] = st.ModTime()
	}
	if statErr == nil && r.loaded && equalTimes(mtimes, r.mtimes) {
		return r.val, nil
	}
	v, err := r.load()
	if err == nil && statErr == nil {
		r.val, r.mtimes, r.loaded = v, mtimes, true
		return v, nil
	}
	if r.loaded {
		return r.val, nil
	}
	if err == nil {
		err = statErr
	}
	var zero T
	return zero, err
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
