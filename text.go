package commitlayer

import (
	"crypto/rand"
	"encoding/base32"
	"unicode/utf8"
)

// Clip returns s cut to at most n bytes at a rune boundary, with "…" added
// when it was cut, so a quoted client value never splits a character.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// NewID returns prefix + 16 random lowercase base32 characters (80 bits):
// the ids of stored records ("act_…", "conn_…", "wh_…").
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + idEncoding.EncodeToString(b[:])
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
