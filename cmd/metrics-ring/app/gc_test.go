package app

import (
	"os"
	"runtime/debug"
	"testing"
)

// Without GOGC, metrics-ring runs at its own GC percent; with it, the operator's value is left alone.
func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "80") // restores the variable when the test ends, also after the Unsetenv below
	debug.SetGCPercent(80)
	if got := setGCPercent(); got != 80 {
		t.Errorf("GOGC=80: percent %d, want 80", got)
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if got := setGCPercent(); got != defaultGCPercent {
		t.Errorf("no GOGC: setGCPercent says %d, want %d", got, defaultGCPercent)
	}
	if got := debug.SetGCPercent(defaultGCPercent); got != defaultGCPercent {
		t.Errorf("no GOGC: the runtime's percent is %d, want %d", got, defaultGCPercent)
	}
}
