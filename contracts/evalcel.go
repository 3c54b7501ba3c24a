package contracts

import (
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// activation binds the CEL variables for one evaluation; it is reused, with
// effect and original swapped per fact.
type activation struct {
	params, action, state, effect, original ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	var v ref.Val
	switch name {
	case "params":
		v = a.params
	case "action":
		v = a.action
	case "state":
		v = a.state
	case "effect":
		v = a.effect
	case "original":
		v = a.original
	}
	return v, v != nil
}

func (a *activation) Parent() interpreter.Activation { return nil }

var emptyMap = exact.NativeToValue(map[string]any{})

// run evaluates p; a panic inside CEL becomes an error, never a crash.
func run(p *program, act interpreter.Activation) (out ref.Val, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("internal error: %v", r)
		}
	}()
	out, _, err = p.prg.Eval(act)
	if err == nil && types.IsError(out) {
		err = fmt.Errorf("%v", out)
	}
	return out, err
}

func runBool(p *program, act interpreter.Activation) (bool, error) {
	out, err := run(p, act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not a bool", typeName(out))
	}
	return bool(b), nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}
