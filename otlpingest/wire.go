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

// ReadBody reads a request body of at most limit bytes, before and after
// decompression: Content-Encoding gzip is inflated, identity (or none) read
// as is; a list ("gzip, identity") is read in the order it was applied.
// Anything else wraps ErrUnsupported. A body over the limit wraps
// ErrTooLarge, a broken gzip stream ErrMalformed.
func ReadBody(r io.Reader, contentEncoding string, limit int64) ([]byte, error) {
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
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	if !gzipped {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: Content-Encoding gzip: the body is not gzip: %v", ErrMalformed, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes once decompressed", ErrTooLarge, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: Content-Encoding gzip: broken gzip stream: %v", ErrMalformed, err)
	}
	return out, nil
}

// Unmarshal decodes an ExportTraceServiceRequest (OTLP/JSON as pdata reads
// it: lowerCamelCase or snake_case keys, hex ids, enums and 64-bit
// integers as numbers or strings, unknown fields skipped). A body that is
// not one wraps ErrMalformed.
func Unmarshal(enc Encoding, body []byte) (ptrace.Traces, error) {
	req := ptraceotlp.NewExportRequest()
	var err error
	if enc == JSON {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		msg := commitlayer.Clip(strings.ToValidUTF8(err.Error(), "?"), 300)
		hint := ""
		if enc == JSON && strings.Contains(err.Error(), "ID.") {
			hint = " (OTLP/JSON trace and span ids are hex strings of 32 and 16 digits, not base64)"
		}
		return ptrace.Traces{}, fmt.Errorf("%w: not an OTLP ExportTraceServiceRequest in %s: %s%s", ErrMalformed, enc.ContentType(), msg, hint)
	}
	return req.Traces(), nil
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
	var b []byte
	var err error
	if enc == JSON {
		b, err = resp.MarshalJSON()
	} else {
		b, err = resp.MarshalProto()
	}
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
	var b []byte
	var err error
	if enc == JSON {
		b, err = protojson.Marshal(st)
	} else {
		b, err = proto.Marshal(st)
	}
	if err != nil { // cannot happen: the message is UTF-8
		return nil
	}
	return b
}

func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}
