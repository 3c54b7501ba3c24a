package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
)

// timeoutError is what a lost response looks like to the caller.
type timeoutError struct{ op string }

func (e *timeoutError) Error() string {
	return "chaos: " + e.op + ": timeout awaiting response headers"
}
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

var _ net.Error = (*timeoutError)(nil)

// refused builds the error a dial to a closed port returns.
func refused(host string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: fakeAddr(host),
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

func errorBody(status int) []byte {
	code, msg := "internal_error", "internal server error"
	switch status {
	case http.StatusForbidden:
		code, msg = "forbidden", "the API key is not allowed to perform this operation"
	case http.StatusTooManyRequests:
		code, msg = "rate_limited", "too many requests; retry later"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return b
}

func jsonResponse(req *http.Request, status int, body []byte) *http.Response {
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

func setBody(resp *http.Response, b []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.Header.Del("Content-Encoding")
}

// readRequest consumes and closes the request body (a RoundTripper must
// close it even when it does not forward).
func readRequest(req *http.Request) []byte {
	if req.Body == nil {
		return nil
	}
	defer req.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	return b
}

func drainRequest(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
