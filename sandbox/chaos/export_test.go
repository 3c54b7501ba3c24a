package chaos

// PhantomBody is phantomBody with the next made-up id, for the tests.
func PhantomBody(method, path string, reqBody, current []byte) []byte {
	return phantomBody(phantomSeq.Add(1), method, path, reqBody, current)
}
