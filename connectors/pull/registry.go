package pull

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/netguard"
	"github.com/commitlayer/commitlayer/internal/secrets"
)

// Registration is a connector a tenant asks for, before it is stored.
type Registration struct {
	TenantID    string
	ConnectorID string // chosen before storing, so secrets are bound to it
	URL         string
	Config      []byte
	APIKey      string
}

// Stored is what a kind keeps of a registration: its secrets sealed
// (Secret), the configuration without them, and what may be shown of them
// (SecretHint: a last 4).
type Stored struct {
	URL        string
	Config     []byte
	Secret     string
	SecretHint string
}

// AddressChecker applies the address rules to what a tenant registers
// (*netguard.Guard): the same rules its dialer applies at each connection.
type AddressChecker interface {
	CheckURL(ctx context.Context, raw string) (*url.URL, error)
	CheckHost(ctx context.Context, host string, port uint16) error
}

var _ AddressChecker = (*netguard.Guard)(nil)

// Env is what a kind may use to prepare a registration.
type Env struct {
	// Secrets seals credentials; nil refuses the credentials that need it.
	Secrets *secrets.Box
	// Addresses checks every URL, host and DSN; nil checks forms only.
	Addresses AddressChecker
}

// Kind is one kind of connector: it validates and prepares what a tenant
// registers (every address checked, every secret sealed) and opens a
// stored connector for pulls. The API and the pull activity look kinds up
// by name (Lookup) instead of switching on it.
type Kind interface {
	Name() string
	// Prepare validates a registration and returns what to store. Errors
	// name the field; an address the rules refuse is a *RefusedError.
	// Their text never quotes a secret.
	Prepare(ctx context.Context, reg Registration, env Env) (Stored, error)
	// Open returns the Puller of a stored connector of the tenant, its
	// secrets opened with opts.Secrets.
	Open(tenantID string, c commitlayer.Connector, opts Options) (Puller, error)
}

// RefusedError is a registration refused for where one of its addresses
// points (or for its form: a Unix socket, a URL with credentials). The API
// answers 422 address_not_allowed naming Field, with the class only (the
// reason may name the address a name resolved to).
type RefusedError struct {
	Field string // "url", "config.url", "config.dsn"
	Err   error
}

func (e *RefusedError) Error() string { return e.Field + ": " + netguard.Classify(e.Err) }
func (e *RefusedError) Unwrap() error { return e.Err }

// Lookup returns the kind of that name.
func Lookup(name string) (Kind, bool) {
	k, ok := kinds[name]
	return k, ok
}

// Kinds lists the kinds' names, sorted.
func Kinds() []string { return slices.Sorted(maps.Keys(kinds)) }

// ErrUnknownKind is returned for a kind no one registered.
var ErrUnknownKind = errors.New("connector kind is not supported")

// OpenConnector returns the Puller of a stored connector of the tenant.
func OpenConnector(tenantID string, c commitlayer.Connector, opts Options) (Puller, error) {
	k, ok := Lookup(c.Kind)
	if !ok {
		return nil, fmt.Errorf("connector kind %q is not supported (known: %v): %w", c.Kind, Kinds(), ErrUnknownKind)
	}
	return k.Open(tenantID, c, opts)
}

// checkURL applies the address rules to a URL of field (form only when
// addrs is nil).
func checkURL(ctx context.Context, addrs AddressChecker, field, raw string) error {
	if addrs == nil {
		return checkURLForm(field, raw)
	}
	if _, err := addrs.CheckURL(ctx, raw); err != nil {
		return &RefusedError{Field: field, Err: err}
	}
	return nil
}

func checkURLForm(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return &commitlayer.FieldError{Field: field, Reason: fmt.Sprintf("%q is not an absolute http or https URL", commitlayer.Clip(raw, 128))}
	}
	return nil
}
