package contracts

import (
	"math"
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/commitlayer/commitlayer"
)

// exactAdapter turns the evaluation's variables into CEL values so that two
// different amounts never compare equal. CEL compares an int with a double
// by converting the int (Int(2^53+1) == Double(2^53) is true), so a double
// of magnitude 2^53 or more becomes an error value: a predicate reading it
// fails (a finding). commitlayer.NormalizeValue refuses such numbers at the
// door; this covers anything stored earlier or handed in directly.
type exactAdapter struct{}

var exact types.Adapter = exactAdapter{}

func (a exactAdapter) NativeToValue(v any) ref.Val {
	switch x := v.(type) {
	case float64:
		return exactDouble(x)
	case float32:
		return exactDouble(float64(x))
	case map[string]any:
		return types.NewStringInterfaceMap(a, x)
	case commitlayer.Attrs:
		return types.NewStringInterfaceMap(a, map[string]any(x))
	case []any:
		return types.NewDynamicList(a, x)
	case ref.Val:
		return x
	}
	if v != nil {
		switch rv := reflect.ValueOf(v); rv.Kind() {
		case reflect.Map:
			return types.NewDynamicMap(a, v)
		case reflect.Slice:
			if rv.Type().Elem().Kind() != reflect.Uint8 {
				return types.NewDynamicList(a, v)
			}
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

func exactDouble(f float64) ref.Val {
	if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) >= 1<<53 {
		return types.NewErr("number %g is beyond ±2^53, where a double does not tell whole units apart: it cannot be compared exactly (send an integer)", f)
	}
	return types.Double(f)
}
