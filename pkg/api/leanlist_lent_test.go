package api

import (
	"bytes"
	goruntime "runtime"
	"testing"
)

// heldWriter is a client's connection as the server writes to it: what it was given, and the most memory a write
// held while it lasted (the capacity behind the bytes, which a client that does not read keeps until the write
// deadline).
type heldWriter struct {
	bytes.Buffer
	held int
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.held = max(w.held, cap(p))
	return w.Buffer.Write(p)
}

// TestFirstReaderHoldsNoMoreThanASmallAnswer: an answer estimated under smallAnswer takes nothing from the answer
// budget, as it holds little while it is written. The first reader of a small list is written from a pooled
// buffer; the pool also holds buffers grown by lists of up to pooledListBytes, so a reader that stalls its
// connection (HTTP/2 flow control) held up to pooledListBytes for a list of a few kilobytes, outside the budget.
func TestFirstReaderHoldsNoMoreThanASmallAnswer(t *testing.T) {
	list, _ := twoWorkloads(t)
	// The pool as a server that also serves lists of a few hundred pods has it: buffers they grew.
	newBuffer := listBuffers.New
	t.Cleanup(func() { listBuffers.New = newBuffer; goruntime.GC(); goruntime.GC() })
	listBuffers.New = func() any { b := make([]byte, 0, pooledListBytes); return &b }
	goruntime.GC()
	goruntime.GC()                  // empties the pool (its victims too): buffers come from New
	list("app=warm", &heldWriter{}) // the encoder's first list with items is compared with the one written directly
	var w heldWriter
	l := list("app=hpa", &w)
	estimate := answerBytes(l.core.b.entries)
	if estimate >= smallAnswer {
		t.Fatalf("the list's estimate is %d bytes, not a small answer", estimate)
	}
	if w.held > smallAnswer {
		t.Errorf("the first reader of a list of %d bytes (estimated %d) held %d bytes while written, more than a "+
			"small answer (%d)", w.Len(), estimate, w.held, smallAnswer)
	}
}
