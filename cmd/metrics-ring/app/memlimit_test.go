package app

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/metrics-ring/metrics-ring/pkg/api"
)

// TestReaderCacheBytes: the readers' budget is the flag when given, else a sixteenth of GOMEMLIMIT, else of the
// cgroup's limit, else the API's default; the answers' budget likewise with an eighth.
func TestReaderCacheBytes(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2, v1 := file("v2", "1073741824\n"), file("v1", "536870912\n")
	unlimited, v1unlimited := file("max", "max\n"), file("v1max", "9223372036854771712\n")
	tests := []struct {
		name    string
		flag    int64
		goLimit int64 // GOMEMLIMIT; 0: none
		files   []string
		want    int64
		answers int64 // answerBytes with the same flag
	}{
		{"the flag wins", 1 << 20, 1 << 30, []string{v2}, 1 << 20, 1 << 20},
		{"GOMEMLIMIT before the cgroup", 0, 512 << 20, []string{v2}, 32 << 20, 64 << 20},
		{"the cgroup v2 limit", 0, 0, []string{v2}, 64 << 20, 128 << 20},
		{"v2 without a limit, then v1", 0, 0, []string{unlimited, v1}, 32 << 20, 64 << 20},
		{"no limit anywhere", 0, 0, []string{unlimited, v1unlimited, filepath.Join(dir, "missing")},
			api.DefaultReaderCacheBytes, api.DefaultAnswerBytes},
	}
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := int64(math.MaxInt64)
			if tt.goLimit > 0 {
				limit = tt.goLimit
			}
			debug.SetMemoryLimit(limit)
			if got := readerCacheBytes(tt.flag, tt.files); got != tt.want {
				t.Errorf("readerCacheBytes = %d, want %d", got, tt.want)
			}
			if got := answerBytes(tt.flag, tt.files); got != tt.answers {
				t.Errorf("answerBytes = %d, want %d", got, tt.answers)
			}
		})
	}
}
