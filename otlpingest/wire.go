package otlpingest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/commitlayer/commitlayer"
)

// Encoding is an OTLP/HTTP body encoding.
type Encoding int

const (
	Protobuf Encoding = iota
	JSON
)

// ContentType is the media type of the encoding.
func (e Encoding) ContentType() string {
	if e == JSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// Errors of a request, for the HTTP edge to map: ErrUnsupported (415),
// ErrTooLarge (413), ErrMalformed (400).
var (
	ErrUnsupported = errors.New("unsupported media type")
	ErrTooLarge    = errors.New("request body too large")
	ErrMalformed   = errors.New("malformed request")
)

// EncodingOf reads the request's Content-Type: application/x-protobuf or
// application/json (parameters ignored). Anything else wraps
// ErrUnsupported.
func EncodingOf(contentType string) (Encoding, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return Protobuf, nil
	case "application/json":
		return JSON, nil
	}
	return Protobuf, fmt.Errorf("%w: Content-Type %q (OTLP/HTTP is application/x-protobuf or application/json)", ErrUnsupported, commitlayer.Clip(contentType, 64))
}

// MaxAnyValueDepth bounds the nesting of an attribute's value, on both
// encodings alike: a value inside more arrays and kvlists than this
// refuses the request (400). The protobuf decoder stops at 100 nested
// messages, which lets exactly this many kvlists through (three messages
// each); OTLP/JSON is held to it as it is read, before anything is
// decoded, and a decoded protobuf request is checked against it.
const MaxAnyValueDepth = 32

// maxJSONDepth bounds the JSON nesting of a request: an attribute value at
// MaxAnyValueDepth in a span event's attributes is 12 levels in, plus 4
// per kvlist.
const maxJSONDepth = 12 + 4*(MaxAnyValueDepth+1)

var errTooDeep = fmt.Errorf("%w: an attribute value is nested in more than %d arrays and kvlists", ErrMalformed, MaxAnyValueDepth)

// Read reads an ExportTraceServiceRequest in enc from r: at most limit
// bytes before and after decompression (a decompression bomb stops at the
// limit). OTLP/JSON is checked as it streams in, before anything is
// decoded (see checkJSON). Errors wrap ErrUnsupported, ErrTooLarge or
// ErrMalformed.
func Read(r io.Reader, enc Encoding, contentEncoding string, limit int64) (ptrace.Traces, error) {
	src, err := decoded(r, contentEncoding, limit)
	if err != nil {
		return ptrace.Traces{}, err
	}
	var body bytes.Buffer
	if enc == JSON {
		if err := checkJSON(io.TeeReader(src, &body)); err != nil {
			return ptrace.Traces{}, err
		}
	}
	if _, err := body.ReadFrom(src); err != nil {
		return ptrace.Traces{}, readError(err)
	}
	return decode(enc, body.Bytes())
}

// decoded returns the body's reader, decompressed, both sides limited.
func decoded(r io.Reader, contentEncoding string, limit int64) (io.Reader, error) {
	gzipped := false
	for _, c := range strings.Split(contentEncoding, ",") {
		switch strings.ToLower(strings.TrimSpace(c)) {
		case "", "identity":
		case "gzip", "x-gzip":
			if gzipped {
				return nil, fmt.Errorf("%w: Content-Encoding %q gzips twice (one gzip, or identity)", ErrUnsupported, commitlayer.Clip(contentEncoding, 32))
			}
			gzipped = true
		default:
			return nil, fmt.Errorf("%w: Content-Encoding %q (OTLP/HTTP is gzip or identity)", ErrUnsupported, commitlayer.Clip(contentEncoding, 32))
		}
	}
	raw := &limited{r: r, limit: limit}
	if !gzipped {
		return raw, nil
	}
	zr, err := gzip.NewReader(raw)
	if err != nil {
		if err := readError(err); errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: Content-Encoding gzip: the body is not gzip: %v", ErrMalformed, err)
	}
	return &limited{r: zr, limit: limit, what: " once decompressed", gzip: true}, nil
}

// limited reads at most limit bytes of r; one more is ErrTooLarge.
type limited struct {
	r           io.Reader
	limit, read int64
	what        string
	gzip        bool // r inflates: its errors are a broken stream
}

func (l *limited) Read(p []byte) (int, error) {
	if rest := l.limit + 1 - l.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := l.r.Read(p)
	if l.read += int64(n); l.read > l.limit {
		return n, fmt.Errorf("%w: more than %d bytes%s", ErrTooLarge, l.limit, l.what)
	}
	if err != nil && err != io.EOF && l.gzip {
		if err = readError(err); !errors.Is(err, ErrTooLarge) {
			err = fmt.Errorf("%w: Content-Encoding gzip: broken gzip stream: %v", ErrMalformed, errors.Unwrap(err))
		}
	}
	return n, err
}

// readError classifies an error of reading the body.
func readError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrMalformed):
		return err
	case errors.As(err, &mbe):
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, mbe.Limit)
	}
	return fmt.Errorf("read body: %w", err)
}

// checkJSON reads one OTLP/JSON request from r strictly, token by token,
// allocating nothing for the values it passes: exactly one JSON value,
// UTF-8 text (no lone surrogate escapes), no name twice in an object, no
// attribute value deeper than MaxAnyValueDepth.
func checkJSON(r io.Reader) error {
	dec := jsontext.NewDecoder(r)
	var containers []bool // per open object or array: an AnyValue's array or kvlist
	anyDepth, afterContainerName := 0, false
	for {
		tok, err := dec.ReadToken()
		switch {
		case err == io.EOF:
			return fmt.Errorf("%w: the body is empty, not an OTLP ExportTraceServiceRequest", ErrMalformed)
		case err != nil:
			if e := readError(err); errors.Is(e, ErrTooLarge) || errors.Is(e, ErrMalformed) {
				return e
			}
			return fmt.Errorf("%w: not an OTLP ExportTraceServiceRequest in application/json: %s", ErrMalformed,
				commitlayer.Clip(strings.TrimPrefix(err.Error(), "jsontext: "), 200))
		}
		switch k := tok.Kind(); {
		case len(containers) == 0 && k != '{':
			return fmt.Errorf("%w: the body is not a JSON object, so not an OTLP ExportTraceServiceRequest", ErrMalformed)
		case k == '{' || k == '[':
			if dec.StackDepth() > maxJSONDepth {
				return fmt.Errorf("%w: JSON nested deeper than %d levels", ErrMalformed, maxJSONDepth)
			}
			containers = append(containers, afterContainerName && k == '{')
			if afterContainerName && k == '{' {
				if anyDepth++; anyDepth > MaxAnyValueDepth {
					return errTooDeep
				}
			}
		case k == '}' || k == ']':
			if containers[len(containers)-1] {
				anyDepth--
			}
			containers = containers[:len(containers)-1]
			if len(containers) == 0 {
				// One value, then nothing but whitespace.
				if _, err := dec.ReadToken(); err != io.EOF {
					if e := readError(err); err != nil && (errors.Is(e, ErrTooLarge) || errors.Is(e, ErrMalformed)) {
						return e
					}
					return fmt.Errorf("%w: the body holds more than one JSON value (or text after it)", ErrMalformed)
				}
				return nil
			}
		}
		afterContainerName = false
		if tok.Kind() == '"' {
			if kind, n := dec.StackIndex(dec.StackDepth()); kind == '{' && n%2 == 1 {
				switch tok.String() {
				case "arrayValue", "array_value", "kvlistValue", "kvlist_value":
					afterContainerName = true
				}
			}
		}
	}
}

// decode decodes an ExportTraceServiceRequest (OTLP/JSON as pdata reads
// it: lowerCamelCase or snake_case keys, hex ids, enums and 64-bit
// integers as numbers or strings, unknown fields skipped).
func decode(enc Encoding, body []byte) (ptrace.Traces, error) {
	req := ptraceotlp.NewExportRequest()
	var err error
	if enc == JSON {
		err = req.UnmarshalJSON(body)
	} else if err = req.UnmarshalProto(body); err != nil && strings.Contains(err.Error(), "max recursion depth") {
		return ptrace.Traces{}, errTooDeep
	}
	if err != nil {
		msg := commitlayer.Clip(strings.ToValidUTF8(err.Error(), "?"), 300)
		hint := ""
		if enc == JSON && strings.Contains(err.Error(), "ID.") {
			hint = " (OTLP/JSON trace and span ids are hex strings of 32 and 16 digits, not base64)"
		}
		return ptrace.Traces{}, fmt.Errorf("%w: not an OTLP ExportTraceServiceRequest in %s: %s%s", ErrMalformed, enc.ContentType(), msg, hint)
	}
	if enc == Protobuf && tooDeep(req.Traces()) {
		return ptrace.Traces{}, errTooDeep
	}
	return req.Traces(), nil
}

// tooDeep reports an attribute value of td nested deeper than
// MaxAnyValueDepth.
func tooDeep(td ptrace.Traces) bool {
	var deep func(v pcommon.Value, d int) bool
	deep = func(v pcommon.Value, d int) bool {
		switch {
		case d > MaxAnyValueDepth:
			return true
		case v.Type() == pcommon.ValueTypeSlice:
			for _, e := range v.Slice().All() {
				if deep(e, d+1) {
					return true
				}
			}
		case v.Type() == pcommon.ValueTypeMap:
			for _, e := range v.Map().All() {
				if deep(e, d+1) {
					return true
				}
			}
		}
		return false
	}
	maps := []pcommon.Map{}
	for _, rs := range td.ResourceSpans().All() {
		maps = append(maps, rs.Resource().Attributes())
		for _, ss := range rs.ScopeSpans().All() {
			maps = append(maps, ss.Scope().Attributes())
			for _, sp := range ss.Spans().All() {
				maps = append(maps, sp.Attributes())
				for _, e := range sp.Events().All() {
					maps = append(maps, e.Attributes())
				}
				for _, l := range sp.Links().All() {
					maps = append(maps, l.Attributes())
				}
			}
		}
	}
	for _, m := range maps {
		for _, v := range m.All() {
			if deep(v, 0) {
				return true
			}
		}
	}
	return false
}

// Response encodes an ExportTraceServiceResponse: partial_success set when
// spans were rejected or there is a message, left unset otherwise (as
// OTLP asks of a request accepted in full).
func Response(enc Encoding, rejected int64, message string) ([]byte, error) {
	if rejected == 0 && message == "" {
		if enc == JSON {
			return []byte("{}"), nil
		}
		return []byte{}, nil // the empty message
	}
	resp := ptraceotlp.NewExportResponse()
	resp.PartialSuccess().SetRejectedSpans(rejected)
	resp.PartialSuccess().SetErrorMessage(strings.ToValidUTF8(message, "\uFFFD"))
	marshal := resp.MarshalProto
	if enc == JSON {
		marshal = resp.MarshalJSON
	}
	b, err := marshal()
	if err != nil {
		return nil, fmt.Errorf("encode export response: %w", err)
	}
	return b, nil
}

// Status encodes a google.rpc.Status, OTLP/HTTP's error body, with the
// gRPC code that fits the HTTP status. A 400 carries a google.rpc.BadRequest
// detail saying what was wrong (as OTLP asks), a 429 or 503 a
// google.rpc.RetryInfo of one second (matching Retry-After).
func Status(enc Encoding, httpStatus int, message string) []byte {
	// A proto3 string must be UTF-8: a message quoting a span's bytes is
	// mended, never left to fail the encoding.
	message = strings.ToValidUTF8(message, "\uFFFD")
	st := &rpcstatus.Status{Code: int32(grpcCode(httpStatus)), Message: message}
	var detail proto.Message
	switch httpStatus {
	case http.StatusBadRequest:
		detail = &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field: "ExportTraceServiceRequest", Description: message}}}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		detail = &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)}
	}
	if detail != nil {
		if a, err := anypb.New(detail); err == nil {
			st.Details = append(st.Details, a)
		}
	}
	marshal := proto.Marshal
	if enc == JSON {
		marshal = protojson.Marshal
	}
	b, _ := marshal(st) // cannot fail: the message is UTF-8
	return b
}

func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}
