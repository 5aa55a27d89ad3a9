package api

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apistorage "k8s.io/apiserver/pkg/storage"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Versions across replicas (DESIGN.md section 2). With two replicas behind one Service the aggregator picks an
// endpoint per request, so a client's resourceVersion or continue token may reach a replica that did not make it.
// Each replica numbers its own snapshots (storage's generations), and two replicas started in the same millisecond
// number them alike, so a bare number cannot tell whose it is. A resourceVersion is therefore "<generation>-<run>":
// run is random, drawn when the server is made, and names this replica and this run; clients treat the string as
// opaque, as Kubernetes asks them to (client-go's reflectors and kubectl only pass it back). A version of another
// run is never read as one of ours: a watch from it is 410 Gone (the client lists again), even when the numbers
// coincide. A continue token carries the version of its page-through and the key of the last item returned; one
// that reaches another replica, or whose snapshot this replica no longer keeps, continues after that key from the
// newest committed snapshot: keys are sorted, so every object comes once, with no error.

// runLen is the length of a run ID: 40 random bits, so two runs draw the same with odds of about 1e-12.
const runLen = 8

var runEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newRun draws the run ID of a server.
func newRun() string {
	b := make([]byte, runLen*5/8)
	_, _ = rand.Read(b) // never fails (it crashes the program if the system's source does)
	return runEncoding.EncodeToString(b)
}

// version is a parsed resourceVersion. run is "" for a bare number: the resourceVersions of metrics-ring before
// runs were named, which are never this run's.
type version struct {
	gen uint64
	run string
}

// parseVersion parses a resourceVersion other than "" and "0" (which name no snapshot).
func parseVersion(s string) (version, error) {
	num, run, named := strings.Cut(s, "-")
	gen, err := strconv.ParseUint(num, 10, 64)
	if err != nil || gen == 0 || (named && !validRun(run)) {
		return version{}, fmt.Errorf("resourceVersion %q: not a resourceVersion of this API", s)
	}
	return version{gen: gen, run: run}, nil
}

func validRun(run string) bool {
	if len(run) != runLen {
		return false
	}
	_, err := runEncoding.DecodeString(run)
	return err == nil
}

// rv is a snapshot's resourceVersion.
func (s *metricsREST[P]) rv(snap storage.Snapshot) string {
	return strconv.FormatUint(snap.Generation(), 10) + "-" + s.run
}

// ours is whether v names a snapshot of this run.
func (s *metricsREST[P]) ours(v version) bool { return v.run == s.run }

// notOurs is the 410 Gone of a resourceVersion of another replica or run.
func notOurs(rv string) error {
	return apierrors.NewResourceExpired(fmt.Sprintf(
		"resourceVersion %q is not one of this server's (another replica's, or an earlier run's): list again", rv))
}

// tooOld is the 410 Gone of a resourceVersion of this run whose snapshot is no longer kept.
func tooOld(v version, latest storage.Snapshot) error {
	return apierrors.NewResourceExpired(fmt.Sprintf(
		"too old resource version: %d (the newest is %d; this server keeps only its newest snapshots and those a reader holds): list again",
		v.gen, latest.Generation()))
}

// tooLarge is Kubernetes' answer to a resourceVersion newer than the newest (504, with a cause client-go's
// reflectors recognise and list again from the newest).
func tooLarge(v version, latest storage.Snapshot) error {
	return apistorage.NewTooLargeResourceVersionError(v.gen, latest.Generation(), 1)
}

// continueVersion marks our continue tokens: "v" is the token format's version.
const continueVersion = "metrics-ring/v1"

// continueToken is what a continue token carries (JSON, base64url-encoded, like Kubernetes' own).
type continueToken struct {
	V     string `json:"v"`
	RV    string `json:"rv"`    // the page-through's resourceVersion
	Start string `json:"start"` // the key of the last item returned
}

func encodeContinue(rv, key string) (string, error) {
	b, err := json.Marshal(continueToken{V: continueVersion, RV: rv, Start: key})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

var errBadToken = errors.New("not a continue token of this API")

// decodeContinue returns a token's resourceVersion and key. A token of metrics-ring before runs were named
// (Kubernetes' format, with a bare generation) gives rv "": it continues after its key like another replica's.
func decodeContinue(token string) (rv, key string, err error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil && json.Unmarshal(b, &t) == nil && t.V == continueVersion {
		if _, err := parseVersion(t.RV); err != nil || t.Start == "" {
			return "", "", errBadToken
		}
		return t.RV, t.Start, nil
	}
	if key, _, err := apistorage.DecodeContinue(token, "/"); err == nil && key != "/" {
		return "", strings.TrimPrefix(key, "/"), nil
	}
	return "", "", errBadToken
}
