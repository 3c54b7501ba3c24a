package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/commitlayer/commitlayer/internal/secrets"
)

// headersAD binds sealed headers to their tenant and connector.
func headersAD(tenantID, connectorID string) []byte {
	return []byte("http-json-connector-headers\x00" + tenantID + "\x00" + connectorID)
}

// ErrHeadersNeedKey: headers (an Authorization, an API key) cannot be
// stored without a secrets key to seal them.
var ErrHeadersNeedKey = errors.New("headers: hold credentials, and the server has no COMMITLAYER_SECRETS_KEY to keep them sealed (set one, or use an API that needs no header)")

// SealHeaders prepares a new connector's configuration for storage: every
// header value is a secret, so the values are sealed (bound to tenant and
// connector) and the stored configuration keeps only their last 4. It
// returns the configuration to store and the sealed headers ("" for none).
func SealHeaders(box *secrets.Box, tenantID, connectorID string, config []byte) ([]byte, string, error) {
	cfg, err := ParseConfig(config)
	if err != nil {
		return nil, "", err
	}
	if len(cfg.Headers) == 0 {
		return config, "", nil
	}
	if box == nil {
		return nil, "", ErrHeadersNeedKey
	}
	plain, err := json.Marshal(cfg.Headers)
	if err != nil {
		return nil, "", fmt.Errorf("http_json connector headers: %w", err)
	}
	sealed, err := box.Seal(plain, headersAD(tenantID, connectorID))
	if err != nil {
		return nil, "", fmt.Errorf("http_json connector: %w", err)
	}
	shown := make(map[string]string, len(cfg.Headers))
	for k, v := range cfg.Headers {
		shown[k] = secrets.Last4(v)
	}
	out, err := withHeaders(config, shown)
	if err != nil {
		return nil, "", err
	}
	return out, sealed, nil
}

// OpenHeaders returns config with the headers sealed by SealHeaders for
// the same tenant and connector put back.
func OpenHeaders(box *secrets.Box, tenantID, connectorID, sealed string, config []byte) ([]byte, error) {
	if box == nil {
		return nil, fmt.Errorf("http_json connector: %w", secrets.ErrNoKey)
	}
	b, err := box.Open(sealed, headersAD(tenantID, connectorID))
	if err != nil {
		return nil, fmt.Errorf("http_json connector %s: %w", connectorID, err)
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("http_json connector %s: sealed headers: %w", connectorID, err)
	}
	return withHeaders(config, h)
}

func withHeaders(config []byte, h map[string]string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil {
		return nil, fmt.Errorf("http_json connector config: %w", err)
	}
	m["headers"], _ = json.Marshal(h)
	return json.Marshal(m)
}
