package main

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// period is one burn cycle: each burning goroutine spins for its share of it and sleeps the rest, so the
// container's CPU rate is the share on average over any window of a second or more.
const period = 10 * time.Millisecond

// burners is the load of each burning goroutine, in millicores; one is started per core of load. busyScale is the
// factor (math.Float64bits) regulate scales their spinning by.
var (
	burnersMu     sync.Mutex
	burners       []*atomic.Int64
	busyScale     atomic.Uint64
	startRegulate sync.Once
)

// setLoad spreads millicores over burning goroutines of at most 1000m each.
func setLoad(millicores int) {
	startRegulate.Do(func() {
		busyScale.Store(math.Float64bits(1))
		go regulate()
	})
	burnersMu.Lock()
	defer burnersMu.Unlock()
	for len(burners) < (millicores+999)/1000 {
		b := new(atomic.Int64)
		burners = append(burners, b)
		go burn(b)
	}
	for _, b := range burners {
		b.Store(int64(min(max(millicores, 0), 1000)))
		millicores -= 1000
	}
}

// asked is the load the burners were given, in millicores.
func asked() float64 {
	burnersMu.Lock()
	defer burnersMu.Unlock()
	var sum int64
	for _, b := range burners {
		sum += b.Load()
	}
	return float64(sum)
}

// burn spins for load/1000 of every period (scaled by busyScale), on one thread.
func burn(load *atomic.Int64) {
	runtime.LockOSThread()
	for {
		busy := time.Duration(float64(period*time.Duration(load.Load())/1000) * math.Float64frombits(busyScale.Load()))
		start := time.Now()
		for time.Since(start) < min(busy, period) {
		}
		if rest := period - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
	}
}

// regulateEvery is how often regulate compares the process's CPU with the load asked.
const regulateEvery = 500 * time.Millisecond

// regulate keeps the process's CPU, as its cgroup counts it, at the load asked: spinning for a share of each period
// is not all it spends (waking a thread a hundred times a second costs the runtime's other threads CPU too: the
// resource-consumer stand-in asked for 50m was read at 61m by metrics-ring over 15 s, and metrics-server's CPU
// spec wants 40m to 60m). Every regulateEvery it scales the burners' spinning by what the last interval's CPU
// (getrusage) fell short of or went past.
func regulate() {
	last, lastCPU := time.Now(), processCPU()
	for {
		time.Sleep(regulateEvery)
		now, cpu := time.Now(), processCPU()
		used := float64(cpu-lastCPU) / float64(now.Sub(last)) * 1000
		last, lastCPU = now, cpu
		busyScale.Store(math.Float64bits(nextScale(math.Float64frombits(busyScale.Load()), asked(), used)))
	}
}

// nextScale is the busy-time factor after an interval that used millicores where asked were asked, from the
// factor f it ran with: moved halfway (in ratio) toward what would have hit the load, within [1/4, 4], so that
// one noisy interval does not swing it; unchanged when nothing was asked or nothing measured.
func nextScale(f, asked, used float64) float64 {
	if asked <= 0 || used <= 0 || math.IsNaN(used) || math.IsInf(used, 0) {
		return f
	}
	return min(max(f*math.Sqrt(asked/used), 0.25), 4)
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
