package api

import (
	"context"
	"io"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// leanList is a kept full list as its build shares it (fullList): the build's entries and the encodings made of
// them, one per encoder (JSON, protobuf...), not the list's items. The items of every pod of a large cluster are
// several times their JSON (BENCHMARKS.md, issue 26 finding 1 (c)): keeping them made a 30,000-pod list too large
// for the default keeper budget, so every list of all pods built again. The items are made again from the entries
// only for a request that needs them (an encoding not yet made, a table, GetObject), within that request's answer
// budget, and let go of after; compact JSON and protobuf are written directly from the entries without items
// (directlists.go), other JSON made a chunk of items at a time (listchunks.go). A request the
// apiserver converts (a table, metadata only) gets its own (fullList). The build's readers share one listCore; each
// request gets a leanList of its own carrying its context (for the answer budget and build slots), except calls
// from outside the handler, which share one.
type leanList[P any] struct {
	core *listCore[P]
	ctx  context.Context // the request's; nil for the shared one
	room bool            // the request took room for the items already (forRequest)
}

// listCore is what a build's full list keeps: the encodings made of its entries.
type listCore[P any] struct {
	b        *build[P]
	making   waitLock // held while an encoding is made: requests for one wait for it, within their context
	mu       sync.Mutex
	byID     []encodedList
	madeOnce []runtime.Identifier // encoders whose encoding was made once, for one reader, and not kept (encode)
	charge   func(n int)          // told the bytes of each encoding kept (chargeEncodings)
}

type encodedList struct {
	id   runtime.Identifier
	data []byte
}

func newLeanList[P any](b *build[P]) *leanList[P] { return &leanList[P]{core: &listCore[P]{b: b}} }

// forRequest is l as the request of ctx reads it: its own when the request came through the handler (it holds
// room in the answer budget), else l. A request that may make the first encoding takes room for the items first,
// as an answer nothing keeps does (noRoom: listAnswer lets go of the build and waits); a later one making another
// format takes it as it encodes.
func (l *leanList[P]) forRequest(ctx context.Context) (runtime.Object, error) {
	if holdOf(ctx) == nil {
		return l, nil
	}
	r := &leanList[P]{core: l.core, ctx: ctx}
	if !l.core.encodedAny() {
		if err := l.core.b.res.answers.take(ctx, answerBytes(l.core.b.entries), false); err != nil {
			return nil, err
		}
		r.room = true
	}
	return r, nil
}

func (l *leanList[P]) context() context.Context {
	if l.ctx == nil {
		return context.Background()
	}
	return l.ctx
}

// objects makes the list's items for ctx's request: within its answer budget (unless it took room already), in a
// slot of buildLimit.
func (c *listCore[P]) objects(ctx context.Context, room bool) (runtime.Object, error) {
	s := c.b.res
	if !room {
		if err := s.answers.take(ctx, answerBytes(c.b.entries), true); err != nil {
			return nil, err
		}
	}
	release, err := s.limit.take(ctx, len(c.b.entries))
	if err != nil {
		return nil, err
	}
	defer release()
	return s.kind.list(c.b.entries, c.b.rv, c.b.created), nil
}

// encodedAny reports whether an encoding was made.
func (c *listCore[P]) encodedAny() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID) > 0
}

// encoded returns the encoding for id, when made.
func (c *listCore[P]) encoded(id runtime.Identifier) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.byID {
		if e.id == id {
			return e.data
		}
	}
	return nil
}

// CacheEncode implements runtime.CacheableObject: the encoding for id, made by the first request that asks for it
// from items made for it alone. An error (no room for the items, a request gone) is that request's: the next one
// tries again.
func (l *leanList[P]) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	data := listEncoding{data: l.core.encoded(id)}
	if data.data == nil {
		var err error
		if data, err = l.encode(id, encode); err != nil {
			return err
		}
	}
	// One Write, as encodings.cacheEncode; not under the lock: a client that does not read holds only itself.
	_, err := w.Write(data.data)
	data.done()
	return err
}

// encode makes the encoding for id, unless a request it waited for made it. The request takes room for the items
// before the lock, waiting for it if need be: waiting under the lock, a user whose share of the budget is held by
// stalled readers kept every other request making another format of the build waiting behind it. The room is the
// request's, given back once its answer is written, even when another request made the encoding meanwhile.
//
// A list small enough to be written in a pooled buffer is kept from the second request for its encoding on: an
// HPA's list of its pods is read once a build, and copying each out of its buffer to keep it was a fifth of the
// bytes the server allocated under the HPA fleet (BENCHMARKS.md); the first request writes it from the buffer.
func (l *leanList[P]) encode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error) (listEncoding, error) {
	c, ctx := l.core, l.context()
	if !l.room {
		if err := c.b.res.answers.take(ctx, answerBytes(c.b.entries), true); err != nil {
			return listEncoding{}, err
		}
	}
	if err := c.b.res.limit.lock(ctx, &c.making); err != nil {
		return listEncoding{}, err
	}
	defer c.making.Unlock()
	if data := c.encoded(id); data != nil {
		return listEncoding{data: data}, nil
	}
	release, err := c.b.res.limit.take(ctx, len(c.b.entries))
	if err != nil {
		return listEncoding{}, err
	}
	made, err := encodeList(c.b.res.kind, c.b.entries, c.b.rv, c.b.created, id, encode, c.b.res.direct)
	release()
	if err != nil {
		return listEncoding{}, err
	}
	// Lent only when its buffer is no more than the answer may hold: the pool also has buffers grown by lists of up
	// to pooledListBytes, which a small answer (taking nothing from the budget) would hold while a client stalls.
	if made.lent() && int64(cap(made.buf)) <= max(smallAnswer, answerBytes(c.b.entries)) && c.firstMade(id) {
		return made, nil
	}
	data := made.kept()
	c.mu.Lock()
	c.byID = append(c.byID, encodedList{id: id, data: data})
	charge := c.charge
	c.mu.Unlock()
	if charge != nil {
		charge(len(data))
	}
	return listEncoding{data: data}, nil
}

// firstMade records that an encoding for id was made, and reports whether it is the first.
func (c *listCore[P]) firstMade(id runtime.Identifier) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.madeOnce, id) {
		return false
	}
	c.madeOnce = append(c.madeOnce, id)
	return true
}

// setCharge sets what is told the bytes of each encoding kept (chargeEncodings).
func (l *leanList[P]) setCharge(charge func(n int)) {
	l.core.mu.Lock()
	l.core.charge = charge
	l.core.mu.Unlock()
}

// GetObject implements runtime.CacheableObject: the items, made for the caller, within its request's answer budget
// when there is room. GetObject cannot fail, and the apiserver calls it for no list (what can fail, CacheEncode and
// tables, makes the items with objects): without room, they are made anyway, as the copy of a kept list was.
func (l *leanList[P]) GetObject() runtime.Object {
	obj, err := l.core.objects(l.context(), l.room)
	if err != nil {
		b := l.core.b
		return b.res.kind.list(b.entries, b.rv, b.created)
	}
	return obj
}

// GetObjectKind implements runtime.Object.
func (l *leanList[P]) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object: the list, made anew.
func (l *leanList[P]) DeepCopyObject() runtime.Object { return l.GetObject() }

// listObjects is the items of a lean list, made for the request of ctx (a table of it).
func (l *leanList[P]) listObjects(ctx context.Context) (runtime.Object, error) {
	return l.core.objects(ctx, l.room)
}

var _ runtime.CacheableObject = &leanList[struct{}]{}
