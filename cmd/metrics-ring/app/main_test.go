package app

import (
	"io"
	"os"
	"sync"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// testLogs is where klog writes in this package's tests, at -v=10. It is set once, before any test starts: a
// test's klog.SetLogger races with the informers' goroutines an earlier test left winding down. A test that reads
// the logs points it at its own buffer; otherwise only warnings and errors reach stderr.
var testLogs = &switchWriter{}

func TestMain(m *testing.M) {
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(testLogs), textlogger.Verbosity(10))))
	os.Exit(m.Run())
}

type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) capture(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		return s.w.Write(p)
	}
	if len(p) > 0 && p[0] != 'I' { // klog's header starts with the severity: I, W, E or F
		return os.Stderr.Write(p)
	}
	return len(p), nil
}
