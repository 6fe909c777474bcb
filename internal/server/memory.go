package server

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Thresholds of returnMemoryWhenQuiet, per poll of a second.
const (
	quietPoll  = time.Second
	quietBytes = 8 << 20  // allocated in a quiet second: at most this
	busyBytes  = 64 << 20 // allocated in a busy second: at least this
	busyFreed  = 1000     // or resources frozen in a busy second
)

// returnMemoryWhenQuiet gives the heap's garbage back to the operating
// system once a burst of work is over. Loading a large store (100,000
// services: the cache's first list, every controller's first pass, the
// DNS table, the echoes of the first status writes) leaves most of the
// heap as garbage, which the runtime would otherwise keep as idle heap and
// return only minutes later, or never while the heap stays near its goal.
// The cache freezing what stopped changing (30 s after such a burst) frees
// as much again while allocating little.
//
// It watches the allocation counter and freed, a count of resources whose
// decoded form was dropped: the first quiet second (under quietBytes
// allocated, nothing freed) after a busy one (over busyBytes allocated, or
// at least busyFreed resources freed) triggers one debug.FreeOSMemory (a
// full collection, a few hundred milliseconds of CPU with 100,000
// services). Steady traffic (DNS queries, the odd write) has no busy
// second, so it never triggers one.
func returnMemoryWhenQuiet(ctx context.Context, log *slog.Logger, freed func() uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	t := time.NewTicker(quietPoll)
	defer t.Stop()
	prev, prevFreed, busy := read(), freed(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, nowFreed := read(), freed()
		switch d, f := now-prev, nowFreed-prevFreed; {
		case d >= busyBytes || f >= busyFreed:
			busy = true
		case d < quietBytes && f == 0 && busy:
			start := time.Now()
			debug.FreeOSMemory()
			log.Debug("returned idle memory to the OS after a burst of work", "dur", time.Since(start))
			busy = false
			now = read()
		}
		prev, prevFreed = now, nowFreed
	}
}
