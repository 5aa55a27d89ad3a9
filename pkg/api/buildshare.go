package api

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Selections of one snapshot that select the same objects share one build (DESIGN.md section 3, "Readers' cost"):
// a list costs what it selects, not how its selector is spelled. Ten thousand distinct selectors that each match
// every pod (`x!=v0`, `x!=v1`, ...) cost one build, its full list and its encodings, plus a selection each: the
// walk of the informer's objects a build starts with, without the sort, the items and the encodings. The list and
// encodings are shared only while the keeper has room for them (BENCHMARKS.md, issue 26 finding 1 (c)).
//
// A new selection is made as before, in a slot of buildLimit when it is large; its objects are fingerprinted
// (objectSet), and a kept build of the same snapshot with that fingerprint whose objects are the same (sameObjects:
// compared, so a collision costs a build, never a wrong answer) is read instead of a new one, held by the
// request's user in the keeper as any shared build is. The selection is remembered as reading that build (an
// alias), so its next requests, pages and watches go straight to it. Removals and eviction unlink a build from its
// aliases too (genBuilds.unlink): a build listing an object removed since is not shared, whichever selection finds it.

// objectSet fingerprints the objects a selection selected: a sum of hashes of their keys (order-independent: the
// informer lists in no order) and how many. Equal fingerprints only name a candidate.
type objectSet struct {
	sum uint64
	n   int
}

var objectSeed = maphash.MakeSeed()

func setOf(objs []object) objectSet {
	s := objectSet{n: len(objs)}
	for i := range objs {
		var h maphash.Hash
		h.SetSeed(objectSeed)
		_, _ = h.WriteString(objs[i].namespace)
		_ = h.WriteByte('/')
		_, _ = h.WriteString(objs[i].name)
		s.sum += h.Sum64()
	}
	return s
}

// maxAliasBytes bounds the selections remembered per snapshot as reading another selection's build (their keys'
// bytes and aliasOverhead each): one user's stream of distinct selectors must not grow the cache without bound. A
// user remembers at most maxAliasBytesPerUser of them, so that one user's long selectors cannot take every other
// user's aliases away (each of theirs would walk its selection again in a slot). A selection past either still
// shares the build, after its own selection.
const (
	maxAliasBytes        = 256 << 10
	maxAliasBytesPerUser = maxAliasBytes / 4
	aliasOverhead        = 64 // the maps' entries and the slice's, about, beside the key's bytes
)

// sharedSets indexes the kept builds of one snapshot by their objects, and the selections found to read them. The
// build cache's mu guards it; its maps are made on first use.
type sharedSets[P any] struct {
	bySet      map[objectSet][]*build[P]
	alias      map[string]*build[P] // another selection's key: the build of its objects
	aliasesOf  map[*build[P]][]aliasOf
	aliasBytes int
	userBytes  map[string]int // the aliases' bytes by the user whose selection each is
}

// aliasOf is one selection remembered as reading a build, and the user who asked for it.
type aliasOf struct{ key, user string }

// add indexes b, made and kept, by its objects.
func (s *sharedSets[P]) add(b *build[P]) {
	if s.bySet == nil {
		s.bySet = map[objectSet][]*build[P]{}
	}
	s.bySet[b.set] = append(s.bySet[b.set], b)
}

// indexed reports whether b is still among the builds of its objects (not evicted, nor made before a removal).
func (s *sharedSets[P]) indexed(b *build[P]) bool { return slices.Contains(s.bySet[b.set], b) }

// addAlias remembers that user's selection key reads b, while there is room, in all and for user.
func (s *sharedSets[P]) addAlias(key, user string, b *build[P]) {
	n := len(key) + aliasOverhead
	if _, ok := s.alias[key]; ok || s.aliasBytes+n > maxAliasBytes || s.userBytes[user]+n > maxAliasBytesPerUser {
		return
	}
	if s.alias == nil {
		s.alias, s.aliasesOf, s.userBytes = map[string]*build[P]{}, map[*build[P]][]aliasOf{}, map[string]int{}
	}
	s.alias[key] = b
	s.aliasesOf[b] = append(s.aliasesOf[b], aliasOf{key, user})
	s.aliasBytes += n
	s.userBytes[user] += n
}

// unlink forgets b and the selections that read it.
func (s *sharedSets[P]) unlink(b *build[P]) {
	if bs := slices.DeleteFunc(s.bySet[b.set], func(o *build[P]) bool { return o == b }); len(bs) > 0 {
		s.bySet[b.set] = bs
	} else {
		delete(s.bySet, b.set)
	}
	for _, a := range s.aliasesOf[b] {
		n := len(a.key) + aliasOverhead
		delete(s.alias, a.key)
		s.aliasBytes -= n
		if s.userBytes[a.user] -= n; s.userBytes[a.user] <= 0 {
			delete(s.userBytes, a.user)
		}
	}
	delete(s.aliasesOf, b)
}

// unlink takes b out of g: its own selection's, those reading it, the index of objects. The cache's mu is held.
func (g *genBuilds[P]) unlink(b *build[P]) {
	if g.bySel[b.key] == b {
		delete(g.bySel, b.key)
	}
	g.sets.unlink(b)
}

// built returns g's build of the selection key, its own or, through an alias, another selection's of the same
// objects; ok is false when g has neither. The cache's mu is held.
func (g *genBuilds[P]) built(key string) (*build[P], bool) {
	if b, ok := g.bySel[key]; ok {
		return b, true
	}
	b, ok := g.sets.alias[key]
	return b, ok
}

// sameAs fingerprints objs, the selection of b (being made), and returns a kept build of g (snapshot snap) whose
// objects they are, remembering b's selection as reading it; nil when there is none. The objects are compared
// without the cache's mu.
func (c *buildCache[P]) sameAs(g *genBuilds[P], b *build[P], snap storage.Snapshot, objs []object) *build[P] {
	b.set = c.fingerprint(objs)
	c.mu.Lock()
	candidates := slices.Clone(g.sets.bySet[b.set])
	c.mu.Unlock()
	for _, o := range candidates {
		select {
		case <-o.done: // its entries and whether it is kept are set
		default:
			continue
		}
		if o.err != nil || !sameObjects(c.res.kind, snap, o.entries, objs) {
			continue
		}
		c.mu.Lock()
		ok := g.sets.indexed(o)
		if ok {
			g.sets.addAlias(b.key, b.keep.user, o)
		}
		c.mu.Unlock()
		if ok {
			return o
		}
	}
	return nil
}

// sameObjects reports whether es, a build's entries at snap (sorted), are what a build of objs (a selection's
// objects, in any order, each once) would hold: every entry among objs, the same object with the same labels, and
// every other one of objs without metrics at snap.
func sameObjects[P any](k kind[P], snap storage.Snapshot, es []entry[P], objs []object) bool {
	if len(objs) < len(es) {
		return false
	}
	found := 0
	for i := range objs {
		o := &objs[i]
		if j := entryOf(es, o); j >= 0 {
			if es[j].uid != o.uid || !sameLabels(es[j].labels, o.labels) {
				return false
			}
			found++
		} else if _, ok := k.point(snap, o); ok {
			return false
		}
	}
	return found == len(es)
}

// entryOf returns the index of o's entry in es (sorted), or -1.
func entryOf[P any](es []entry[P], o *object) int {
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].less(o) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(es) && es[lo].namespace == o.namespace && es[lo].name == o.name {
		return lo
	}
	return -1
}

// sameLabels reports whether two objects' labels are equal: the same map of the informer's, most of the time.
func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() || maps.Equal(a, b)
}
