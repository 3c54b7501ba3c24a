package commitlayer

import "unicode/utf8"

// Clip returns s cut to at most n bytes at a rune boundary, with "…" added
// when it was cut: for quoting a client's value in a message or a log
// without splitting a character in half.
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
