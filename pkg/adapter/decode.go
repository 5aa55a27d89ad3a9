package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/prometheus/common/model"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
)

// defaultMaxResponseBytes is --prometheus-max-response-bytes' default: the default queries' answer for every
// container of a cluster at Kubernetes' largest supported size (150,000 pods) fits, with room to spare
// (BENCHMARKS.md, "Figures behind the comments").
const defaultMaxResponseBytes = 64 << 20

var (
	// errTooLarge is wrapped by the error of a response over the cap.
	errTooLarge = errors.New("response too large")
	// errMalformed is wrapped by the error of a response that is not the Prometheus HTTP API's JSON.
	errMalformed = errors.New("not a valid Prometheus API response")
)

// capped reads at most max bytes of r, and fails once r has more, so an oversized response is an error and never
// a truncated success. err keeps the first read error (the cap, a timeout, a reset), which is the cause of any
// decoding failure that follows; head keeps the first bytes, for the log.
type capped struct {
	r    io.Reader
	left int64 // bytes still allowed
	max  int64
	err  error
	head []byte
}

func newCapped(r io.Reader, max int64) *capped { return &capped{r: r, left: max, max: max} }

// headBytes is how much of a response the log line shows when it is not a Prometheus API response.
const headBytes = 256

func (c *capped) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left+1] // one byte past the cap tells a response of exactly max bytes from a larger one
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		n, err = int(c.left), fmt.Errorf("%w: over the cap of %d bytes (--prometheus-max-response-bytes)", errTooLarge, c.max)
	}
	c.left -= int64(n)
	if len(c.head) < headBytes {
		c.head = append(c.head, p[:min(n, headBytes-len(c.head))]...)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, err
}

// decode reads a Prometheus HTTP API response as a stream: the envelope token by token and the result one sample
// at a time, so what it holds is the vector, not the body. It returns the vector of a successful instant query,
// or an error saying what the server answered. Errors become the 503 text every namespace reader sees, so
// Prometheus' own message and the decoder's (which quote the response) go to the log only.
func decode(r io.Reader, status int) (model.Vector, []string, error) {
	dec := json.NewDecoder(r)
	var env envelope
	if err := env.decode(dec); err != nil {
		return nil, nil, logonly.Wrap(fmt.Errorf("HTTP %d: %w", status, errMalformed), "decodeError", err.Error())
	}
	if env.Status != "success" {
		//lint:ignore ST1005 Prometheus is a proper noun
		err := logonly.Wrap(fmt.Errorf("Prometheus answered HTTP %d: %s", status, word(env.ErrorType)),
			"prometheusError", env.Error)
		if env.ErrorType == "timeout" {
			err = fmt.Errorf("%w: %w", errTimeout, err)
		}
		return nil, env.Warnings, err
	}
	if env.ResultType != model.ValVector.String() {
		return nil, env.Warnings, fmt.Errorf("query returned a %s, want a vector", word(env.ResultType))
	}
	return env.Result, env.Warnings, nil
}

// envelope is the Prometheus HTTP API response, with data's fields inline.
type envelope struct {
	Status, ErrorType, Error string
	Warnings                 []string
	ResultType               string
	Result                   model.Vector
}

// decode reads one JSON object into e. Fields may come in any order; unknown ones are skipped. A result read
// before its resultType is read as a vector, and refused afterwards if it was not one.
func (e *envelope) decode(dec *json.Decoder) error {
	return object(dec, func(key string) error {
		switch key {
		case "status":
			return dec.Decode(&e.Status)
		case "errorType":
			return dec.Decode(&e.ErrorType)
		case "error":
			return dec.Decode(&e.Error)
		case "warnings":
			return dec.Decode(&e.Warnings)
		case "data":
			return object(dec, func(key string) error {
				switch key {
				case "resultType":
					return dec.Decode(&e.ResultType)
				case "result":
					return e.decodeResult(dec)
				}
				return skip(dec)
			})
		}
		return skip(dec)
	})
}

// decodeResult reads the result array one sample at a time.
func (e *envelope) decodeResult(dec *json.Decoder) error {
	if e.ResultType != "" && e.ResultType != model.ValVector.String() {
		return skip(dec) // a matrix or scalar: refused by the caller
	}
	if ok, err := open(dec, '['); !ok || err != nil {
		return err
	}
	for dec.More() {
		s := new(model.Sample)
		if err := dec.Decode(s); err != nil {
			return err
		}
		e.Result = append(e.Result, s)
	}
	return closing(dec, ']')
}

// object reads a JSON object (or null), calling field for each key with the decoder at its value.
func object(dec *json.Decoder, field func(key string) error) error {
	if ok, err := open(dec, '{'); !ok || err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // the decoder only returns object keys as strings here
		if err := field(key); err != nil {
			return err
		}
	}
	return closing(dec, '}')
}

// open reads the next token: true for the delimiter want, false for null, an error for anything else.
func open(dec *json.Decoder, want json.Delim) (bool, error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return false, err
	case tok == nil:
		return false, nil
	case tok != want:
		return false, fmt.Errorf("want %v or null, got %T", want, tok)
	}
	return true, nil
}

func closing(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err == nil && tok != want {
		err = fmt.Errorf("want %v, got %T", want, tok)
	}
	return err
}

// skip reads past one JSON value of a field metrics-ring does not use.
func skip(dec *json.Decoder) error {
	var v json.RawMessage
	return dec.Decode(&v)
}

var wordRE = regexp.MustCompile(`^[a-z_]{1,32}$`)

// word returns an errorType or resultType, which the API defines as short lower-case words, or a placeholder for
// anything else: the response's text does not go into errors.
func word(s string) string {
	if wordRE.MatchString(s) {
		return s
	}
	return "(unrecognized)"
}
