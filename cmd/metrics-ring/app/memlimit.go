package app

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/api"
)

// readerCacheShare is the part of the memory limit that readers' builds may keep between requests (--reader-cache-bytes
// by default): collection's own data is the rest, and it grows with the cluster (BENCHMARKS.md).
const readerCacheShare = 16

// answerShare is the part of the memory limit that answers nothing keeps may hold while they are written
// (--answer-bytes by default): more than what builds keep, as an answer's items and encoding are several times
// its build's entries, and they are let go of as soon as they are written.
const answerShare = 8

// cgroupLimitFiles are where a container's memory limit is read when GOMEMLIMIT is not set: cgroup v2, then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimit is the process's memory limit in bytes: GOMEMLIMIT (the manifests set it from the container's
// limit), else the cgroup's, else 0 when there is none.
func memoryLimit(files []string) int64 {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return l
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) means no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<50 {
			return n
		}
	}
	return 0
}

// readerCacheBytes is --reader-cache-bytes when given, else a sixteenth of the memory limit, else the API's default.
func readerCacheBytes(flag int64, files []string) int64 {
	return partOfMemoryLimit(flag, files, readerCacheShare, api.DefaultReaderCacheBytes,
		"Readers' builds kept within a part of the memory limit", "readerCacheBytes")
}

// answerBytes is --answer-bytes when given, else an eighth of the memory limit, else the API's default.
func answerBytes(flag int64, files []string) int64 {
	return partOfMemoryLimit(flag, files, answerShare, api.DefaultAnswerBytes,
		"Answers in flight bounded by a part of the memory limit", "answerBytes")
}

// partOfMemoryLimit is flag when given, else the memory limit divided by share (logged as msg with key), else
// fallback when no limit is known.
func partOfMemoryLimit(flag int64, files []string, share, fallback int64, msg, key string) int64 {
	if flag > 0 {
		return flag
	}
	limit := memoryLimit(files)
	if limit == 0 {
		return fallback
	}
	n := limit / share
	klog.V(1).InfoS(msg, "memoryLimit", limit, key, n)
	return n
}
