package pgquery

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/commitlayer/commitlayer/internal/secrets"
)

// dsnAD binds a sealed DSN to its tenant and connector.
func dsnAD(tenantID, connectorID string) []byte {
	return []byte("postgres-connector-dsn\x00" + tenantID + "\x00" + connectorID)
}

// ErrPasswordNeedsKey: a DSN with a password cannot be stored without a
// secrets key to seal it.
var ErrPasswordNeedsKey = errors.New("dsn: holds a password, and the server has no COMMITLAYER_SECRETS_KEY to keep it sealed (set one, or connect with a role that needs no password)")

// SealDSN prepares a new connector's configuration for storage: a DSN with
// a password is sealed (bound to tenant and connector) and the
// configuration keeps it without the password. It returns the
// configuration to store and the sealed DSN ("" when there was no password).
func SealDSN(box *secrets.Box, tenantID, connectorID string, config []byte) ([]byte, string, error) {
	cfg, err := ParseConfig(config)
	if err != nil {
		return nil, "", err
	}
	pc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, "", fmt.Errorf("dsn: is not a PostgreSQL connection string")
	}
	// Only a password the DSN itself gives is sealed (not one from the
	// environment or a password file, which pgx also reads).
	stripped := stripPassword(cfg.DSN)
	if pc.Password == "" || stripped == cfg.DSN {
		return config, "", nil
	}
	if box == nil {
		return nil, "", ErrPasswordNeedsKey
	}
	sealed, err := box.Seal([]byte(cfg.DSN), dsnAD(tenantID, connectorID))
	if err != nil {
		return nil, "", fmt.Errorf("postgres connector: %w", err)
	}
	out, err := WithDSN(config, stripped)
	if err != nil {
		return nil, "", err
	}
	return out, sealed, nil
}

// OpenDSN opens a DSN sealed by SealDSN for the same tenant and connector.
func OpenDSN(box *secrets.Box, tenantID, connectorID, sealed string) (string, error) {
	if box == nil {
		return "", fmt.Errorf("postgres connector: %w", secrets.ErrNoKey)
	}
	b, err := box.Open(sealed, dsnAD(tenantID, connectorID))
	if err != nil {
		return "", fmt.Errorf("postgres connector %s: %w", connectorID, err)
	}
	return string(b), nil
}

// WithDSN returns config with its dsn replaced (the opened one).
func WithDSN(config []byte, dsn string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil {
		return nil, fmt.Errorf("postgres connector config: %w", err)
	}
	m["dsn"], _ = json.Marshal(dsn)
	return json.Marshal(m)
}

var kvPassword = regexp.MustCompile(`(?i)(^|\s+)password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)

// stripPassword removes the password from a URL or key=value DSN.
func stripPassword(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn
		}
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		if q.Has("password") {
			q.Del("password")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return strings.TrimSpace(kvPassword.ReplaceAllString(dsn, ""))
}
