package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// ErrBadResponse marks an answer that is not a valid response (a body that
// does not parse, a wrong content). A client package wraps it in its own
// sentinel, e.g. fmt.Errorf("feed gave a bad response: %w", netguard.ErrBadResponse),
// so Classify says "bad response".
var ErrBadResponse = errors.New("bad response")

// What Classify answers. Each is safe to show a tenant: none carries an
// address, a port or the peer's own words.
const (
	Timeout           = "timeout"
	Refused           = "refused"
	ConnectionLost    = "connection lost"
	NoSuchHost        = "no such host"
	DNSFailure        = "dns failure"
	TLSFailure        = "tls failure"
	BadResponse       = "bad response"
	TooManyRedirects  = "too many redirects"
	AddressNotAllowed = "address not allowed"
	InvalidURL        = "invalid url"
	Canceled          = "canceled"
	Unreachable       = "unreachable"
)

// classed is an error that knows its tenant-safe class (a connector's SQL
// error: "sql error 42P01"); Classify answers it as it is.
type classed interface{ ErrorClass() string }

// httpStatus is an error carrying the non-2xx status a server answered
// (httpevents.StatusError, given an HTTPStatus method).
type httpStatus interface{ HTTPStatus() int }

// Classify returns a short phrase for a failed fetch that a tenant may see:
// "http 503" for a status, the class an error gives itself (ErrorClass()
// string, e.g. "sql error 42P01"), or one of the constants above. It never returns
// the error's text, which may name internal addresses or tell open and
// closed ports apart beyond these classes: log err itself on the server.
// A nil error gives "".
func Classify(err error) string {
	if err == nil {
		return ""
	}
	var (
		hs     httpStatus
		cl     classed
		dnsErr *net.DNSError
		urlErr *URLError
		netErr net.Error
	)
	switch {
	case errors.Is(err, ErrNotAllowed):
		return AddressNotAllowed
	case errors.As(err, &cl) && cl.ErrorClass() != "":
		return cl.ErrorClass()
	case errors.As(err, &urlErr):
		return InvalidURL
	case errors.As(err, &hs) && hs.HTTPStatus() != 0:
		return fmt.Sprintf("http %d", hs.HTTPStatus())
	case errors.Is(err, ErrTooManyRedirects):
		return TooManyRedirects
	case errors.Is(err, ErrBadResponse):
		return BadResponse
	case errors.As(err, &dnsErr):
		switch {
		case dnsErr.IsNotFound:
			return NoSuchHost
		case dnsErr.IsTimeout:
			return Timeout
		}
		return DNSFailure
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return ConnectionLost
	case isTLS(err):
		return TLSFailure
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return TLSFailure
	case strings.Contains(err.Error(), "malformed HTTP"), strings.Contains(err.Error(), "HTTP/1.x transport connection broken"):
		// net/http's untyped errors for a peer that does not speak HTTP.
		return BadResponse
	}
	return Unreachable
}

func isTLS(err error) bool {
	var (
		rh    tls.RecordHeaderError
		alert tls.AlertError
		cv    *tls.CertificateVerificationError
		ua    x509.UnknownAuthorityError
		hn    x509.HostnameError
		ci    x509.CertificateInvalidError
	)
	return errors.As(err, &rh) || errors.As(err, &alert) || errors.As(err, &cv) ||
		errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// userinfo matches the user:password@ of a URL in a text.
var userinfo = regexp.MustCompile(`(//)[^/@\s"]*@`)

// Redact returns err's text with any URL credentials (user:password@)
// replaced by ***@: net/http quotes a redirect's Location verbatim in its
// errors. For the server log; tenants get Classify.
func Redact(err error) string {
	if err == nil {
		return ""
	}
	return userinfo.ReplaceAllString(err.Error(), "${1}***@")
}
