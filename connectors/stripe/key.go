package stripe

import (
	"fmt"

	"github.com/commitlayer/commitlayer/internal/secrets"
)

// keyAD binds a sealed key to its tenant and connector: a sealed value
// copied to another connector's row does not open.
func keyAD(tenantID, connectorID string) []byte {
	return []byte("stripe-connector-key\x00" + tenantID + "\x00" + connectorID)
}

// SealKey checks a key a tenant gives for a new stripe connector and seals
// it for storage. It returns the sealed value to store and the hint that
// may be shown (its last 4). box is nil when COMMITLAYER_SECRETS_KEY is not
// set: the kind is then refused with secrets.ErrNoKey.
func SealKey(box *secrets.Box, tenantID, connectorID, key string) (sealed, hint string, err error) {
	if err := CheckKey(key); err != nil {
		return "", "", err
	}
	if box == nil {
		return "", "", fmt.Errorf("stripe connector: %w", secrets.ErrNoKey)
	}
	sealed, err = box.Seal([]byte(key), keyAD(tenantID, connectorID))
	if err != nil {
		return "", "", fmt.Errorf("stripe connector: %w", err)
	}
	return sealed, secrets.Last4(key), nil
}

// OpenKey opens a key sealed by SealKey for the same tenant and connector,
// and checks it again (a key stored before a rule changed is refused).
func OpenKey(box *secrets.Box, tenantID, connectorID, sealed string) (string, error) {
	if box == nil {
		return "", fmt.Errorf("stripe connector: %w", secrets.ErrNoKey)
	}
	b, err := box.Open(sealed, keyAD(tenantID, connectorID))
	if err != nil {
		return "", fmt.Errorf("stripe connector %s: %w", connectorID, err)
	}
	key := string(b)
	if err := CheckKey(key); err != nil {
		return "", fmt.Errorf("stripe connector %s: stored key: %w", connectorID, err)
	}
	return key, nil
}
