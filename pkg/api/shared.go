package api

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// shared is one object of a build shared between requests (its full list, a page, its watch events), made by the
// first and charged to the build while the build keeps it.
type shared struct {
	once sync.Once
	obj  runtime.Object
	err  error

	mu    sync.Mutex
	bytes int64 // charged to its build: the estimate, then its encodings
	gone  bool  // let go of by its build: encodings made later, by requests that still have it, are theirs
}

// charge charges an encoding of n bytes to the build's account k, unless the build let go of the object.
func (p *shared) charge(kp *keeper, k *kept, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gone {
		p.bytes += n
		kp.charge(k, n)
	}
}

// letGo marks p let go of and returns the bytes it was charged, for a refund.
func (p *shared) letGo() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone = true
	return p.bytes
}
