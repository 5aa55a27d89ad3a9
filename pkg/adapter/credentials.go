package adapter

import (
	"net/url"
	"strings"

	pconfig "github.com/prometheus/common/config"
)

// splitCredentials takes the user information out of a parsed --prometheus-url: the URL that is left is the one
// requests go to and errors quote, and the credentials are sent as basic auth instead, as Go would have sent them.
// An endpoint is quoted in the 503 text every namespace reader gets, in the ERROR event that ends their watches,
// and in logs (DESIGN.md section 3): a URL carrying a password must never be, so none is kept.
func splitCredentials(u *url.URL) (*url.URL, *pconfig.BasicAuth) {
	if u.User == nil {
		return u, nil
	}
	stripped := *u
	stripped.User = nil
	password, _ := u.User.Password()
	return &stripped, &pconfig.BasicAuth{Username: u.User.Username(), Password: pconfig.Secret(password)}
}

// redact is raw, a --prometheus-url, as messages may quote it: without user information. A URL that does not
// parse keeps only its scheme when it has an '@' anywhere, since where its user information ends is then unclear.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Opaque == "" {
		u, _ = splitCredentials(u)
		return u.String()
	}
	if !strings.Contains(raw, "@") {
		return raw
	}
	if scheme, _, ok := strings.Cut(raw, "://"); ok && !strings.ContainsAny(scheme, "@:/") {
		return scheme + "://(redacted)"
	}
	return "(redacted)"
}
