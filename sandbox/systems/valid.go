package systems

// Bounds on free text in requests.
const (
	maxName     = 64
	maxText     = 500
	maxLongText = 10_000
)

// validCurrency reports whether c is three upper-case letters.
func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// isIdent reports whether s holds only letters, digits, '_' and '-'.
func isIdent(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}
