package api

import (
	"context"
	"net/http"
	"time"

	"github.com/munnerz/goautoneg"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// writeGrace is how long past its request's deadline a response may still be written. The generic timeout filter
// answers 504 at the deadline, but only once it has the response's lock, which a write blocked on a client that
// does not read holds: without a write deadline, such a client would hold its answer, and its room in the
// answer budget, until it disconnects.
const writeGrace = time.Second

// answersWritten wraps the API handler: it gives each request a hold on the answer budget, given back once the
// handler has returned (the response written, or its write failed), and sets the response's write deadline a
// little past the request's, so that a stalled reader lets go at the request timeout. Watches and other
// long-running requests have no deadline and get none.
func answersWritten(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if deadline, ok := ctx.Deadline(); ok {
			if err := http.NewResponseController(w).SetWriteDeadline(deadline.Add(writeGrace)); err != nil {
				klog.V(4).InfoS("Response without a write deadline", "path", r.URL.Path, "err", err)
			}
		}
		ctx, hold := withAnswerHold(ctx)
		defer hold.release()
		hold.converts = converts(r)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// converts reports whether r may ask for its answer converted (Accept's "as" parameter: a Table, metadata only),
// which the apiserver makes from the answer's items. Any clause asking for one counts, whichever the apiserver picks.
func converts(r *http.Request) bool {
	for _, a := range goautoneg.ParseAccept(r.Header.Get("Accept")) {
		if _, ok := a.Params["as"]; ok {
			return true
		}
	}
	return false
}

// convertsList reports whether the request of ctx may ask for its list converted (converts).
func convertsList(ctx context.Context) bool {
	h := holdOf(ctx)
	return h != nil && h.converts
}

// listAnswer answers a list from a build: its full list or a page. When the answer budget has no room for an
// answer nothing keeps, the build is let go of while the request waits for room (a build nothing keeps is the
// request's alone), then made again, so that waiting holds nothing.
func (s *metricsREST[P]) listAnswer(ctx context.Context, latest storage.Snapshot, opts *metainternalversion.ListOptions, sel scope) (runtime.Object, error) {
	obj, err := s.listOnce(ctx, latest, opts, sel)
	n, wait := isNoRoom(err)
	if !wait {
		return obj, err
	}
	if err := s.answers.reserve(ctx, n); err != nil {
		return nil, err
	}
	return s.listOnce(ctx, latest, opts, sel)
}

func (s *metricsREST[P]) listOnce(ctx context.Context, latest storage.Snapshot, opts *metainternalversion.ListOptions, sel scope) (runtime.Object, error) {
	b, after, err := s.pageBuild(ctx, latest, opts, sel)
	if err != nil {
		return nil, err
	}
	var limit int64
	if opts != nil {
		limit = opts.Limit
	}
	if after == "" && (limit <= 0 || int64(len(b.entries)) <= limit) {
		return b.fullList(ctx)
	}
	return s.page(ctx, b, after, limit)
}

// alone makes an answer nothing keeps, of the entries es, within the answer budget, in a slot of buildLimit when
// slot says so. Without room it returns noRoom: the request lets go of what it holds before it waits.
func (s *metricsREST[P]) alone(ctx context.Context, es []entry[P], slot bool, answer func() (runtime.Object, error)) (runtime.Object, error) {
	if err := s.answers.take(ctx, answerBytes(es), false); err != nil {
		return nil, err
	}
	if slot {
		release, err := s.limit.take(ctx, len(es))
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return answer()
}

// tableRoom takes the answer budget's room for the table of obj, a list: the table is made for this request
// alone. A request whose list is its own holds room already, and its table never waits for more.
func (s *metricsREST[P]) tableRoom(ctx context.Context, obj runtime.Object) error {
	if !meta.IsListType(obj) {
		return nil
	}
	return s.answers.take(ctx, tableBytes(meta.LenList(obj)), true)
}
