package api

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// hookedKind is a kind that counts its builds and the items it builds, and can block, fail or panic.
type hookedKind[P any] struct {
	kind[P]
	builds atomic.Int32 // selections listed from the informers
	items  atomic.Int32 // API objects built
	block  chan struct{}
	fail   error
	// panicIn names the method that panics: "same" (a watch feed's diff) or "empty" (a watcher's bookmark).
	panicIn atomic.Value
}

func (k *hookedKind[P]) objects(namespace string, sel labels.Selector) ([]object, error) {
	k.builds.Add(1)
	if k.block != nil {
		<-k.block
	}
	if k.fail != nil {
		return nil, k.fail
	}
	return k.kind.objects(namespace, sel)
}

func (k *hookedKind[P]) item(e *entry[P], rv string, created metav1.Time) runtime.Object {
	k.items.Add(1)
	return k.kind.item(e, rv, created)
}

func (k *hookedKind[P]) list(es []entry[P], rv string, created metav1.Time) runtime.Object {
	k.items.Add(int32(len(es)))
	return k.kind.list(es, rv, created)
}

func (k *hookedKind[P]) same(a, b *P) bool {
	if k.panicIn.Load() == "same" {
		panic("same: test panic")
	}
	return k.kind.same(a, b)
}

func (k *hookedKind[P]) empty(namespace, name, rv string) runtime.Object {
	if k.panicIn.Load() == "empty" {
		panic("empty: test panic")
	}
	return k.kind.empty(namespace, name, rv)
}

// heldGenerations counts the snapshots the cache holds builds of.
func (c *buildCache[P]) heldGenerations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.gens)
}

// fullLists counts the full lists the cache keeps built.
func (c *buildCache[P]) fullLists() int {
	c.mu.Lock()
	var bs []*build[P]
	for _, g := range c.gens {
		for _, b := range g.bySel {
			bs = append(bs, b)
		}
	}
	c.mu.Unlock()
	n := 0
	for _, b := range bs {
		b.full.mu.Lock()
		if b.full.obj != nil {
			n++
		}
		b.full.mu.Unlock()
	}
	return n
}
