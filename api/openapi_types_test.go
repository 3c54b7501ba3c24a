package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/client/webhook"
)

// TestOpenAPIMatchesTypes holds api/openapi.json's schemas to the wire
// types of package client, which the server answers with (encoding/json,
// writeJSON) and the client sends with (jsonv2): a schema's properties are
// the fields its type writes with every field set, and its required
// properties are those the type writes when zero (for a body a client
// sends, every required property at least: a field the client always
// writes may still be optional to the server). Nested objects written out
// in a schema are held to the nested value the same way.
func TestOpenAPIMatchesTypes(t *testing.T) {
	answer := func(v any) ([]byte, error) { return json.Marshal(v) }
	send := func(v any) ([]byte, error) { return jsonv2.Marshal(v) }
	type wire struct {
		v       any
		marshal func(any) ([]byte, error)
		request bool // a body clients send (or both ways)
	}
	types := map[string]wire{
		"Error":               {client.ErrorBody{}, answer, false},
		"Fact":                {commitlayer.Fact{}, send, true},
		"FactBatch":           {client.FactBatch{}, send, true},
		"FactsResult":         {client.FactsResult{}, answer, false},
		"Claim":               {commitlayer.Claim{}, send, true},
		"ActionInput":         {client.ActionInput{}, send, true},
		"Action":              {client.StoredAction{}, answer, false},
		"ActionAccepted":      {client.Accepted{}, answer, false},
		"Finding":             {commitlayer.Finding{}, answer, false},
		"Verdict":             {commitlayer.Verdict{}, answer, false},
		"ActionDetail":        {client.ActionDetail{}, answer, false},
		"RecheckResult":       {client.RecheckResult{}, answer, false},
		"Orphan":              {client.Orphan{}, answer, false},
		"OrphanList":          {client.OrphanList{}, answer, false},
		"Contract":            {client.Contract{}, answer, false},
		"ContractList":        {client.ContractList{}, answer, false},
		"ConnectorInput":      {client.ConnectorInput{}, send, true},
		"Connector":           {client.Connector{}, answer, false},
		"ConnectorList":       {client.ConnectorList{}, answer, false},
		"Source":              {client.Source{}, answer, false},
		"SourceList":          {client.SourceList{}, answer, false},
		"SpanRejection":       {client.SpanRejection{}, answer, false},
		"AttemptInput":        {client.AttemptInput{}, send, true},
		"TenantInput":         {client.TenantInput{}, send, true},
		"Tenant":              {client.Tenant{}, answer, false},
		"TenantList":          {client.TenantList{}, answer, false},
		"Health":              {client.Health{}, answer, false},
		"Ready":               {client.Ready{}, answer, false},
		"WebhookInput":        {client.WebhookInput{}, send, true},
		"Webhook":             {client.Webhook{}, answer, false},
		"WebhookCreated":      {client.WebhookCreated{}, answer, false},
		"WebhookList":         {client.WebhookList{}, answer, false},
		"WebhookRotation":     {client.WebhookRotation{}, send, true},
		"WebhookDelivery":     {client.WebhookDelivery{}, answer, false},
		"WebhookDeliveryList": {client.WebhookDeliveryList{}, answer, false},
		"WebhookEvent":        {webhook.Event{}, func(v any) ([]byte, error) { return v.(webhook.Event).Body() }, false},
		"ListedAction":        {client.ListedAction{}, answer, false},
		"ActionList":          {client.ActionList{}, answer, false},
		"StatusCounts":        {commitlayer.StatusCounts{}, answer, false},
		"ActionStats":         {client.ActionStats{}, answer, false},
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &doc))
	for name, schema := range doc.Components.Schemas {
		if schema["properties"] == nil || strings.HasPrefix(name, "OTLP") {
			continue // free-form (Attrs), or OTLP's own protobuf JSON
		}
		w, ok := types[name]
		if !assert(t, ok, "schema %s has no wire type in this test", name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			full, err := w.marshal(filled(reflect.TypeOf(w.v)).Interface())
			require.NoError(t, err)
			zero, err := w.marshal(w.v)
			require.NoError(t, err)
			var f, z map[string]any
			require.NoError(t, json.Unmarshal(full, &f))
			require.NoError(t, json.Unmarshal(zero, &z))
			matchSchema(t, name, schema, f, z, w.request)
		})
	}
	for name := range types {
		require.Contains(t, doc.Components.Schemas, name)
	}
}

// assert is require.True that lets the loop go on to name every schema
// without a type.
func assert(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// matchSchema holds an object schema to a value written full and zero.
func matchSchema(t *testing.T, where string, schema, full, zero map[string]any, request bool) {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	var required []string
	for _, r := range asSlice(schema["required"]) {
		required = append(required, r.(string))
	}
	require.ElementsMatch(t, sortedKeys(props), sortedKeys(full), "%s: the schema's properties and the type's fields", where)
	if request {
		for _, r := range required {
			require.Contains(t, zero, r, "%s: %s is required but the type may leave it out", where, r)
		}
	} else {
		require.ElementsMatch(t, required, sortedKeys(zero), "%s: the schema's required properties and the fields the type always writes", where)
	}
	for k, p := range props {
		ps, _ := p.(map[string]any)
		fv, _ := full[k].(map[string]any)
		zv, _ := zero[k].(map[string]any)
		if ps["properties"] != nil && fv != nil && zv != nil {
			matchSchema(t, where+"."+k, ps, fv, zv, request)
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// filled is a value of type t with every field set: what the type writes
// when nothing is left out.
func filled(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch {
	case t == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	case t == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"k":1}`))
	case t.Kind() == reflect.Pointer:
		v.Set(filled(t.Elem()).Addr())
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(filled(t.Field(i).Type))
			}
		}
	case t.Kind() == reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), filled(t.Elem())))
	case t.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(reflect.ValueOf("k").Convert(t.Key()), filled(t.Elem()))
	case t.Kind() == reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	case t.Kind() == reflect.String:
		v.SetString("x")
	case t.Kind() == reflect.Bool:
		v.SetBool(true)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		v.SetInt(1)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		v.SetUint(1)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		v.SetFloat(1.5)
	}
	return v
}
