// Package secrets encrypts connector credentials at rest with AES-256-GCM.
//
// The key comes from COMMITLAYER_SECRETS_KEY: the standard base64 encoding
// (RFC 4648, with padding; the URL-safe alphabet is accepted too) of exactly
// 32 random bytes, e.g. `openssl rand -base64 32`. Without it, a connector
// kind that needs a stored secret (stripe) is refused.
//
// A sealed value is the text "v1:" followed by the standard base64 of
// nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes). The caller binds each
// value to where it is stored with associated data (e.g. tenant id and
// connector id), so a ciphertext copied to another row does not open.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// EnvKey is the environment variable holding the key.
const EnvKey = "COMMITLAYER_SECRETS_KEY"

// KeySize is the key length in bytes (AES-256).
const KeySize = 32

const prefix = "v1:"

var (
	// ErrNoKey means COMMITLAYER_SECRETS_KEY is not set.
	ErrNoKey = errors.New(EnvKey + " is not set: connector secrets cannot be stored (set it to the base64 of 32 random bytes)")
	// ErrBadKey means the key is not the base64 of 32 bytes.
	ErrBadKey = errors.New(EnvKey + " must be the base64 of exactly 32 bytes")
	// ErrOpen means a sealed value did not decrypt: wrong key, wrong
	// associated data, or tampered.
	ErrOpen = errors.New("stored secret does not decrypt with this key")
)

// Box seals and opens secrets with one key.
type Box struct {
	aead cipher.AEAD
}

// FromEnv builds a Box from getenv(EnvKey): ErrNoKey when it is empty,
// ErrBadKey when it is malformed. The key's value never appears in an error.
func FromEnv(getenv func(string) string) (*Box, error) {
	v := strings.TrimSpace(getenv(EnvKey))
	if v == "" {
		return nil, ErrNoKey
	}
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		key, err = base64.URLEncoding.DecodeString(v)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: not base64", ErrBadKey)
	}
	return New(key)
}

// New builds a Box from a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: got %d bytes", ErrBadKey, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext bound to ad with a fresh random nonce.
func (b *Box) Seal(plaintext, ad []byte) (string, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal secret: %w", err)
	}
	out := b.aead.Seal(nonce, nonce, plaintext, ad)
	return prefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts a value from Seal with the same ad.
func (b *Box) Open(sealed string, ad []byte) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return nil, fmt.Errorf("open secret: %w: not a v1 sealed value", ErrOpen)
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(raw) < b.aead.NonceSize()+b.aead.Overhead() {
		return nil, fmt.Errorf("open secret: %w: malformed", ErrOpen)
	}
	n := b.aead.NonceSize()
	pt, err := b.aead.Open(nil, raw[:n], raw[n:], ad)
	if err != nil {
		return nil, fmt.Errorf("open secret: %w", ErrOpen)
	}
	return pt, nil
}

// Last4 is what may be shown of a secret: "…" and its last four
// characters, or "…" alone when it is shorter than 12 (too little would be
// left hidden).
func Last4(secret string) string {
	if len(secret) < 12 {
		return "…"
	}
	return "…" + secret[len(secret)-4:]
}
