package api

import (
	"container/list"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// DefaultReaderCacheBytes is the budget of what readers' builds keep when none is given and no memory limit is
// known (Deps.ReaderCacheBytes).
const DefaultReaderCacheBytes = 64 << 20

// keeper bounds what the builds of readers keep between requests (their entries, shared lists and pages, watch
// events and every encoding of them) by bytes, not by count (DESIGN.md section 3, "Readers' cost"), and shares the
// budget fairly between users: a user at or above its share (the budget split evenly between the users keeping
// anything) makes room by evicting its own least recently used builds, so one user cycling through distinct
// selections that each match everything evicts its own, never the server's memory or another user's builds; a
// user below its share takes room from the heaviest user. What is not kept is still served, built for the request
// alone (and the number built at once is buildLimit's to bound). Bytes are estimates, cheap to make: items times
// a per-item size, plus encoded bytes as they are made.
type keeper struct {
	budget int64

	mu    sync.Mutex
	total int64
	users map[string]*userKept
}

// userKept is what one user's requests keep, least recently used first.
type userKept struct {
	bytes int64
	items list.List // of *kept
}

// kept is one build's account: its bytes and its owner, the user whose request made it. A build's shares (a list,
// a page, an encoding) are charged to it as they are made, whoever asks for them.
type kept struct {
	user  string
	bytes int64
	elem  *list.Element // in its user's items; nil when not kept
	gone  bool          // evicted or forgotten: nothing more is charged to it
	drop  func()        // lets go of what the build keeps, once evicted; called on its own goroutine
}

func newKeeper(budget int64) *keeper {
	if budget <= 0 {
		budget = DefaultReaderCacheBytes
	}
	return &keeper{budget: budget, users: map[string]*userKept{}}
}

// admit charges n more bytes to k (adding k when it is not kept yet), evicting other builds as fairness says, and
// reports whether k may keep them. k itself is never evicted here: when there is no room without it, nothing is
// charged and the caller keeps nothing more (a build not admitted at all is the request's alone).
func (kp *keeper) admit(k *kept, n int64) bool {
	kp.mu.Lock()
	if k.gone || n > kp.budget {
		kp.mu.Unlock()
		return false
	}
	u := kp.users[k.user]
	if u == nil {
		u = &userKept{}
		kp.users[k.user] = u
	}
	var victims []*kept
	for kp.total+n > kp.budget {
		v := kp.victim(k, u, n)
		if v == nil {
			break
		}
		kp.remove(v)
		victims = append(victims, v)
	}
	ok := kp.total+n <= kp.budget
	if ok {
		if k.elem == nil {
			k.elem = u.items.PushBack(k)
		} else {
			u.items.MoveToBack(k.elem)
		}
		k.bytes += n
		u.bytes += n
		kp.total += n
		buildsKeptBytes.Set(float64(kp.total))
	} else if k.elem == nil && u.bytes == 0 {
		delete(kp.users, k.user)
	}
	kp.mu.Unlock()
	for _, v := range victims {
		v.evicted()
	}
	return ok
}

// victim chooses the build to evict to make room for n more bytes of k's user u: u's least recently used one when
// u would be at or above its share, else the heaviest user's least recently used one. nil when there is none to
// evict but k. Called with kp.mu held.
func (kp *keeper) victim(k *kept, u *userKept, n int64) *kept {
	// u's share is the budget split between the users keeping anything, u included (admit added it).
	if u.bytes+n >= kp.budget/int64(len(kp.users)) {
		return oldest(u, k)
	}
	var heaviest *userKept
	for _, o := range kp.users {
		if o != u && (heaviest == nil || o.bytes > heaviest.bytes) {
			heaviest = o
		}
	}
	if heaviest == nil || heaviest.bytes <= u.bytes+n {
		return oldest(u, k)
	}
	return oldest(heaviest, k)
}

// oldest is u's least recently used build other than k, or nil.
func oldest(u *userKept, k *kept) *kept {
	for e := u.items.Front(); e != nil; e = e.Next() {
		if v := e.Value.(*kept); v != k {
			return v
		}
	}
	return nil
}

// charge charges n bytes already spent to k (an encoding, made while answering): when they do not fit, k is
// evicted, and what it kept goes once its readers are done with it.
func (kp *keeper) charge(k *kept, n int64) {
	if kp.admit(k, n) {
		return
	}
	kp.mu.Lock()
	evict := !k.gone
	kp.remove(k)
	kp.mu.Unlock()
	if evict {
		k.evicted()
	}
}

// evicted lets go of what an evicted build keeps. Apart, since its caller may hold the locks of another build:
// the bytes left the accounts already, the memory goes once the readers that have the build are done with it.
func (k *kept) evicted() {
	buildsEvicted.Inc()
	go k.drop()
}

// touch marks k used now: the least recently used builds go first.
func (kp *keeper) touch(k *kept) {
	kp.mu.Lock()
	if k.elem != nil {
		kp.users[k.user].items.MoveToBack(k.elem)
	}
	kp.mu.Unlock()
}

// shrink sets what k is charged to n bytes, no more than it was: the build let go of its shares.
func (kp *keeper) shrink(k *kept, n int64) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if k.elem == nil || n >= k.bytes {
		return
	}
	u := kp.users[k.user]
	u.bytes -= k.bytes - n
	kp.total -= k.bytes - n
	k.bytes = n
	buildsKeptBytes.Set(float64(kp.total))
}

// refund takes n bytes off what k is charged: a share it let go of (a page).
func (kp *keeper) refund(k *kept, n int64) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if k.elem == nil {
		return
	}
	n = min(n, k.bytes)
	k.bytes -= n
	kp.users[k.user].bytes -= n
	kp.total -= n
	buildsKeptBytes.Set(float64(kp.total))
}

// forget stops accounting for k, which its cache dropped: nothing more is charged to it.
func (kp *keeper) forget(k *kept) {
	kp.mu.Lock()
	kp.remove(k)
	kp.mu.Unlock()
}

// remove takes k out of the accounts and marks it gone. Called with kp.mu held.
func (kp *keeper) remove(k *kept) {
	k.gone = true
	if k.elem == nil {
		return
	}
	u := kp.users[k.user]
	u.items.Remove(k.elem)
	k.elem = nil
	u.bytes -= k.bytes
	kp.total -= k.bytes
	k.bytes = 0
	buildsKeptBytes.Set(float64(kp.total))
	if u.items.Len() == 0 {
		delete(kp.users, k.user)
	}
}

// usage returns the bytes kept in all and by user.
func (kp *keeper) usage(user string) (total, byUser int64) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if u := kp.users[user]; u != nil {
		byUser = u.bytes
	}
	return kp.total, byUser
}

// The keeper's estimates: the size of an entry, of a built item, of a watch event's item. A built item's
// containers each carry a ResourceList, a small map of quantities: resourceListBytes is what one costs on the heap
// with CPU, memory and swap (measured by TestKeeperEstimates).
const (
	resourceListBytes = 700
	buildOverhead     = 512 // the build itself, its key and its place in the cache
)

func entryBytes[P any](es []entry[P]) int64 {
	var e entry[P]
	return buildOverhead + int64(len(es))*int64(unsafe.Sizeof(e))
}

// listBytes estimates the items built from es, as a list or a page.
func listBytes[P any](es []entry[P]) int64 {
	var n int64
	for i := range es {
		switch p := any(es[i].point).(type) {
		case storage.PodPoint:
			n += int64(unsafe.Sizeof(metrics.PodMetrics{})) +
				int64(len(p.Names))*int64(unsafe.Sizeof(metrics.ContainerMetrics{})+resourceListBytes)
		default:
			n += int64(unsafe.Sizeof(metrics.NodeMetrics{})) + resourceListBytes
		}
	}
	return n
}

// eventBytes estimates the items and events of es as watches carry them (their encodings are charged as made).
func eventBytes[P any](es []entry[P]) int64 {
	var i watchItem[P]
	return int64(len(es)) * int64(unsafe.Sizeof(i)+unsafe.Sizeof(watch.Event{})+8)
}
