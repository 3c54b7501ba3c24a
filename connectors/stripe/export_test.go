package stripe

// ParseCursor checks a stored cursor ("" is the start), for the tests.
func ParseCursor(s string) error {
	_, err := parseCursor(s)
	return err
}
