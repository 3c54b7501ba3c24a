package otlpingest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/otlpingest"
	"github.com/commitlayer/commitlayer/service"
)

// FuzzTraces: any body, in either encoding, is decoded (or refused as
// malformed), read for tool calls in every dialect and mapped through a
// binding without a panic; a call either maps to recordings or names its
// problem (the action rules are the API's, tested there).
func FuzzTraces(f *testing.F) {
	c, err := contracts.Parse([]byte(`id: refund_customer
subject: order
settlement: 10m
sources: [payments]
bindings:
  - tool: refund
    subject: "'order:' + args.order_id"
    params: {amount: args.amount}
`))
	require.NoError(f, err)
	b := contracts.NewBindings([]*contracts.Contract{c})

	td := oneSpan(&testing.T{}, "execute_tool refund", func(m pcommon.Map) {
		m.PutStr("gen_ai.tool.call.arguments", `{"order_id":"o_1","amount":5}`)
		m.PutEmptyMap("gen_ai.tool.call.result").PutInt("n", 1)
	})
	req := ptraceotlp.NewExportRequestFromTraces(td)
	pb, err := req.MarshalProto()
	require.NoError(f, err)
	js, err := req.MarshalJSON()
	require.NoError(f, err)
	f.Add(pb, false)
	f.Add(js, true)
	f.Add([]byte(`{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","name":"tools/call refund","start_time_unix_nano":"1","attributes":[{"key":"mcp.method.name","value":{"string_value":"tools/call"}},{"key":"gen_ai.tool.call.arguments","value":{"kvlist_value":{"values":[{"key":"order_id","value":{"bytes_value":"aGk="}}]}}}]}]}]}]}`), true)

	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		body, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(body, true)
	}

	f.Fuzz(func(t *testing.T, body []byte, json bool) {
		enc := otlpingest.Protobuf
		if json {
			enc = otlpingest.JSON
		}
		td, err := otlpingest.Read(bytes.NewReader(body), enc, "", 8<<20)
		if err != nil {
			require.ErrorIs(t, err, otlpingest.ErrMalformed)
			return
		}
		calls, _ := otlpingest.ToolCalls(td, b.Bound)
		for _, call := range calls {
			recs, _, err := otlpingest.Record(call, service.NewToolCalls(0, 0), b)
			if err != nil {
				require.NotEmpty(t, err.Error())
			}
			for _, r := range recs {
				require.NotEmpty(t, r.Key)
				require.Len(t, r.Hash, 32)
			}
		}
		_, err = otlpingest.Response(enc, int64(len(calls)), string(body))
		require.NoError(t, err)
		require.NotNil(t, otlpingest.Status(enc, 400, string(body)))
	})
}
