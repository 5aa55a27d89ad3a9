package scraper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"

	"github.com/klauspost/compress/gzip"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
)

// snippetBytes is how much of an error response's body goes into the log line (never into the error: it becomes
// the 503 text every namespace reader sees).
const snippetBytes = 256

// kubeletClient fetches /metrics/resource bodies. One client (one keep-alive transport, HTTP/1.1: Options.restConfig
// says why) serves every node, so connections are reused between scrapes.
type kubeletClient struct {
	// rt sends the requests: no http.Client, whose redirect and cookie handling would cost a header copy per
	// request for nothing (redirects are never followed: the transport adds the bearer token to every request it
	// sends, so following one would hand our credentials to whatever host a kubelet, or whoever answers at its
	// address, names). No timeout either: every request carries a context deadline (--kubelet-request-timeout).
	rt       http.RoundTripper
	header   http.Header // every request's headers; each worker sends a copy of its own
	maxBytes int64
}

// lender lends the buffer and gzip reader a response's body is read into: the Scraper's buffers (buffers.go), which
// decide what is kept between scrapes.
type lender interface {
	lend(want int) scratch
}

// readers are one worker's reusable request and decoding state.
type readers struct {
	header http.Header  // the client's headers, reused by every request of the worker (RoundTrip must not change them)
	gz     *gzip.Reader // lent with the body buffer; nil until a gzip response
	// borrowed says the worker's body buffer and gz are lent (lender), until the worker gives them back with
	// their use.
	borrowed bool
	use      spareUse
	// answered says the latest request got a response, whatever its status: a Connection: close it carried was
	// honoured (connage.go).
	answered bool
}

// Buffer sizes of a kept-alive kubelet connection. net/http's defaults are held for the connection's life, which adds
// up over thousands of nodes (BENCHMARKS.md, "Figures behind the comments"). A request is a GET whose headers, a
// bearer token included, fit the write buffer, and a response's body is read in reads larger than the read buffer,
// which bypass it, so it only ever holds the status line, the headers and the chunk sizes.
const (
	connWriteBuffer = 2 << 10
	connReadBuffer  = 1 << 10
)

// smallConnBuffers sets connWriteBuffer and connReadBuffer, and one connection a kubelet, on the *http.Transport
// under rt's client-go wrappers (which keep the values when certificate rotation clones the transport). Called by
// restConfig's WrapTransport before the transport sends anything; a transport of another kind is left as it is.
func smallConnBuffers(rt http.RoundTripper) {
	for rt != nil {
		switch t := rt.(type) {
		case *http.Transport:
			if t != http.DefaultTransport {
				t.WriteBufferSize, t.ReadBufferSize = connWriteBuffer, connReadBuffer
				// One connection a kubelet: a request whose dial outlived it (the dial goes on, for the next
				// request's use) is waited for rather than doubled by the next, so a kubelet slow to handshake
				// costs one handshake and one connection, not one a cycle or a warm-up round.
				t.MaxConnsPerHost = 1
			}
			return
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return
		}
	}
}

func newKubeletClient(o *Options) (*kubeletClient, error) {
	// rest.TransportFor gives what metrics-server has: CA file or data, client certificate, bearer token or token
	// file (re-read when it rotates), exec plugins, keep-alive (utilnet.SetTransportDefaults), but HTTP/1.1 only
	// (restConfig says why).
	rt, err := rest.TransportFor(o.restConfig())
	if err != nil {
		return nil, fmt.Errorf("building the kubelet client transport: %w", err)
	}
	// The kubelet negotiates its format; ask for the classic text format the parser reads.
	h := http.Header{"Accept": {"text/plain;version=0.0.4"}}
	if o.Compression {
		// Asked for here and decoded by readers.decode (the transport's own gzip is off): its reader is allocated
		// anew for every response, where a worker's is reset.
		h.Set("Accept-Encoding", "gzip")
	}
	return &kubeletClient{rt: rt, header: h, maxBytes: o.MaxResponseBytes}, nil
}

// fetch GETs url and reads the body into buf (reused; grown when needed) and returns it. A worker that holds no
// buffer borrows one, and a gzip reader, from spares once the response has come: not while it waits for the
// kubelet, so that what is kept follows the scrapes reading at once, not the workers (buffers.go), and one fit for
// a body of want bytes, the node's previous. Errors name the node and the URL as t shows it.
func (c *kubeletClient) fetch(ctx context.Context, node string, t target, buf []byte, rd *readers,
	spares lender, want int) ([]byte, error) {
	url := t.shown
	rd.answered = false
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return buf, fmt.Errorf("node %q: GET %s: %w", node, url, err)
	}
	if rd.header == nil {
		rd.header = c.header.Clone()
	}
	req.Header = rd.header
	req.Close = t.closeAfter
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		// As http.Client words it: Get "url": error.
		return buf, fmt.Errorf("node %q: %w", node, &neturl.Error{Op: "Get", URL: url, Err: err})
	}
	rd.answered = true
	// Closing an unread body makes the transport drop the connection (HTTP/1) or reset the stream (HTTP/2) rather
	// than drain an oversized or unwanted response.
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return buf, statusError(node, url, resp)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/vnd.google.protobuf") {
		return buf, fmt.Errorf("node %q: GET %s: unsupported Content-Type %q, want the text format", node, url, ct)
	}
	if resp.ContentLength > c.maxBytes {
		return buf, fmt.Errorf("node %q: GET %s: %w: Content-Length %d", node, url, c.tooLarge(), resp.ContentLength)
	}
	if !rd.borrowed {
		sc := spares.lend(want)
		buf, rd.gz, rd.use, rd.borrowed = sc.buf, sc.gz, sc.spareUse, true
	}
	body, err := rd.decode(resp)
	if err != nil {
		return buf, fmt.Errorf("node %q: GET %s: %w", node, url, err)
	}
	if n := resp.ContentLength + 2; body == resp.Body && n > 2 && n > int64(cap(buf)) {
		// Sized once rather than doubled towards it: a large response costs one allocation and no copies. At
		// least doubled all the same, so that nodes a little larger each time do not each cost one.
		buf = make([]byte, 0, max(n, min(2*int64(cap(buf)), c.maxBytes+2)))
	}
	// The cap applies to the decoded bytes too, so a small gzip body cannot expand past it.
	buf, err = readCapped(body, buf[:0], c.maxBytes)
	if err != nil {
		return buf, fmt.Errorf("node %q: GET %s: reading body: %w", node, url, err)
	}
	// A kubelet may answer a request it saw cancelled with an empty 200 that the transport still delivers: past
	// the deadline, what was read is a timeout, not a body.
	if err := ctx.Err(); err != nil {
		return buf[:0], fmt.Errorf("node %q: GET %s: %w", node, url, context.Cause(ctx))
	}
	return buf, nil
}

// statusError is the error of a response other than 200: the status, with the body's start or a redirect's
// target for the log only.
func statusError(node, url string, resp *http.Response) error {
	err := fmt.Errorf("node %q: GET %s: status %d %s", node, url, resp.StatusCode, http.StatusText(resp.StatusCode))
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return logonly.Wrap(fmt.Errorf("%w: redirects are not followed (credentials go only to the node's address)",
			err), "location", loc)
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, snippetBytes))
	return logonly.Wrap(err, "body", strings.TrimSpace(string(snippet)))
}

// decode returns resp's body as plain text, through the worker's gzip reader when the kubelet compressed it.
func (rd *readers) decode(resp *http.Response) (io.Reader, error) {
	switch enc := resp.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return resp.Body, nil
	case "gzip":
		if rd.gz == nil {
			gz, err := gzip.NewReader(resp.Body)
			if err != nil {
				return nil, fmt.Errorf("reading gzip body: %w", err)
			}
			rd.gz = gz
		} else if err := rd.gz.Reset(resp.Body); err != nil {
			return nil, fmt.Errorf("reading gzip body: %w", err)
		}
		return rd.gz, nil
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
}

// errTooLarge is wrapped by errors about responses over the size cap.
var errTooLarge = errors.New("response too large")

func (c *kubeletClient) tooLarge() error {
	return fmt.Errorf("%w: over the cap of %d bytes", errTooLarge, c.maxBytes)
}

// readCapped appends r's content to buf, failing once it exceeds limit bytes. It keeps one spare byte of capacity.
func readCapped(r io.Reader, buf []byte, limit int64) ([]byte, error) {
	for {
		if cap(buf)-len(buf) < 2 {
			// Double, but never past the cap: a huge response costs at most limit+2 bytes of buffer.
			size := int64(cap(buf) + max(cap(buf), 16<<10))
			next := make([]byte, len(buf), min(size, limit+2))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf) : cap(buf)-1])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf[:0], fmt.Errorf("%w: over the cap of %d bytes", errTooLarge, limit)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
