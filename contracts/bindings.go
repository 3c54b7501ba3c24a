package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
	"go.yaml.in/yaml/v3"

	"github.com/commitlayer/commitlayer"
)

// Binding is one tool call that records an action of the contract, so an
// MCP gateway or a trace ingest records it with no code in the agent
// (docs/contract-language.md). Its CEL expressions read `args` and `result`.
type Binding struct {
	Tool    string            `json:"tool"`             // the tool's name, as the agent calls it
	Subject string            `json:"subject"`          // CEL giving "type:id" of the contract's subject type
	Params  map[string]string `json:"params,omitempty"` // action param → CEL giving its (JSON) value
	When    string            `json:"when,omitempty"`   // CEL boolean: record an action only when it holds
}

// maxToolName bounds a binding's tool name (MCP names are at most 128).
const maxToolName = 128

// binding is a compiled Binding.
type binding struct {
	index   int
	spec    *Binding
	subject *program
	when    *program
	params  []boundParam // sorted by name
}

type boundParam struct {
	name string
	prg  *program
}

// bindings reads the bindings list.
func (p *parser) bindings(n *yaml.Node) []Binding {
	var out []Binding
	for i, item := range p.list(n, "bindings") {
		path := fmt.Sprintf("bindings[%d]", i)
		g := p.fields(item, path, "tool", "subject", "params", "when")
		b := Binding{
			Tool:    p.str(g["tool"], path+".tool"),
			Subject: p.str(g["subject"], path+".subject"),
			When:    p.str(g["when"], path+".when"),
		}
		if pn := g["params"]; p.usable(pn, path+".params") {
			pp := path + ".params"
			if pn.Kind != yaml.MappingNode {
				p.fail(pp, pn.Line, "must be a mapping of param name to expression, got %s", describe(pn))
			} else {
				b.Params = map[string]string{}
				for j := 0; j+1 < len(pn.Content); j += 2 {
					k, v := pn.Content[j], pn.Content[j+1]
					if k.Kind != yaml.ScalarNode || k.Value == "" {
						p.fail(pp, k.Line, "param names must be plain, non-empty names")
						continue
					}
					name := pp + "." + k.Value
					if _, dup := b.Params[k.Value]; dup {
						p.fail(name, k.Line, "param given twice")
						continue
					}
					p.nodes[name] = v
					b.Params[k.Value] = p.str(v, name)
				}
			}
		}
		out = append(out, b)
	}
	return out
}

// validTool reports whether s can name a tool: 1 to 128 printable non-spaces.
func validTool(s string) bool {
	if s == "" || len(s) > maxToolName {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) < 0
}

// validParamName reports whether s can name a param: 1 to 128 bytes, printable.
func validParamName(s string) bool {
	return s != "" && len(s) <= 128 && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}

// compileBindings validates and compiles the bindings.
func (p *parser) compileBindings(env *cel.Env, specs []Binding, sources map[string]bool) []*binding {
	var out []*binding
	for i := range specs {
		b := &specs[i]
		path := fmt.Sprintf("bindings[%d]", i)
		if p.required(path+".tool", b.Tool) && !validTool(b.Tool) {
			p.fail(path+".tool", p.line(path+".tool"), "%q is not a tool name (1 to %d characters, no spaces)", commitlayer.Clip(b.Tool, 64), maxToolName)
		}
		cb := &binding{index: i, spec: b}
		if p.required(path+".subject", b.Subject) {
			cb.subject = p.compile(env, path+".subject", b.Subject, stringResult, sources)
		}
		cb.when = p.compile(env, path+".when", b.When, boolResult, sources)
		for _, name := range slices.Sorted(maps.Keys(b.Params)) {
			field := path + ".params." + name
			if !validParamName(name) {
				p.fail(field, p.line(field), "%q is not a param name", commitlayer.Clip(name, 64))
				continue
			}
			if !p.required(field, b.Params[name]) {
				continue
			}
			cb.params = append(cb.params, boundParam{name: name, prg: p.compile(env, field, b.Params[name], anyResult, sources)})
		}
		out = append(out, cb)
	}
	return out
}

// Tools returns the tools the contract's bindings name, sorted, each once.
func (c *Contract) Tools() []string {
	var out []string
	for _, b := range c.bindings {
		out = append(out, b.spec.Tool)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Binds reports whether one of the contract's bindings names tool.
func (c *Contract) Binds(tool string) bool {
	return slices.ContainsFunc(c.bindings, func(b *binding) bool { return b.spec.Tool == tool })
}

// Match is a tool call bound to a contract: the action it records.
type Match struct {
	Contract *Contract
	Binding  int // index in the contract's Spec.Bindings
	Subject  commitlayer.Subject
	Params   commitlayer.Attrs
}

// BindingError is a binding that could not be evaluated for a tool call.
type BindingError struct {
	Contract string
	Tool     string
	Field    string // "bindings[0].subject", "bindings[0].params.amount"
	Reason   string
}

func (e *BindingError) Error() string {
	return fmt.Sprintf("contract %s: %s (tool %s): %s", e.Contract, e.Field, e.Tool, e.Reason)
}

// Unwrap makes it commitlayer.ErrInvalid: the call (or the contract) is at fault.
func (e *BindingError) Unwrap() error { return commitlayer.ErrInvalid }

// Bind evaluates the contract's bindings of tool for one call (args and
// result as decoded JSON objects, nil is empty): a Match for each binding
// whose when holds, in contract order. A binding that cannot be evaluated
// gives a *BindingError (joined when several) beside the others' matches.
func (c *Contract) Bind(tool string, args, result map[string]any) ([]Match, error) {
	var act interpreter.Activation
	var matches []Match
	var errs []error
	for _, b := range c.bindings {
		if b.spec.Tool != tool {
			continue
		}
		if act == nil {
			var err error
			if act, err = newBindActivation(args, result); err != nil {
				return nil, &BindingError{Contract: c.ID(), Tool: tool, Field: fmt.Sprintf("bindings[%d]", b.index), Reason: err.Error()}
			}
		}
		m, err := c.bindOne(b, act)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m != nil {
			matches = append(matches, *m)
		}
	}
	return matches, errors.Join(errs...)
}

func (c *Contract) bindOne(b *binding, act interpreter.Activation) (*Match, error) {
	path := fmt.Sprintf("bindings[%d]", b.index)
	fail := func(field, format string, args ...any) error {
		return &BindingError{Contract: c.ID(), Tool: b.spec.Tool, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if b.when != nil {
		ok, err := runBool(b.when, act)
		if err != nil {
			return nil, fail(path+".when", "%v", err)
		}
		if !ok {
			return nil, nil
		}
	}
	if b.subject == nil {
		return nil, fail(path+".subject", "did not compile")
	}
	out, err := run(b.subject, act)
	if err != nil {
		return nil, fail(path+".subject", "%v", err)
	}
	s, ok := out.(types.String)
	if !ok {
		return nil, fail(path+".subject", "gave %s, not a string type:id", typeName(out))
	}
	subject, err := commitlayer.ParseSubject(string(s))
	if err != nil {
		return nil, fail(path+".subject", "%v", err)
	}
	if !c.ActsOn(subject) {
		return nil, fail(path+".subject", "gave %q, but contract %s acts on %s subjects", commitlayer.Clip(string(subject), 128), c.ID(), c.Spec.Subject)
	}
	params := commitlayer.Attrs{}
	for _, bp := range b.params {
		field := path + ".params." + bp.name
		if bp.prg == nil {
			return nil, fail(field, "did not compile")
		}
		v, err := run(bp.prg, act)
		if err != nil {
			return nil, fail(field, "%v", err)
		}
		native, err := jsonValue(v, 0)
		if err != nil {
			return nil, fail(field, "%v", err)
		}
		params[bp.name] = native
	}
	return &Match{Contract: c, Binding: b.index, Subject: subject, Params: params}, nil
}

// newBindActivation binds a call's args and result (nil is empty).
func newBindActivation(args, result map[string]any) (interpreter.Activation, error) {
	na, err := commitlayer.NormalizeValue(args)
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	nr, err := commitlayer.NormalizeValue(result)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	return interpreter.NewActivation(map[string]any{
		"args":   types.DefaultTypeAdapter.NativeToValue(na),
		"result": types.DefaultTypeAdapter.NativeToValue(nr),
	})
}

// maxParamDepth bounds the nesting of a bound param's value.
const maxParamDepth = 32

// jsonValue turns a CEL value into a JSON value (nil, bool, string, int64,
// float64, []any, map[string]any); other CEL types are an error naming them.
func jsonValue(v ref.Val, depth int) (any, error) {
	if depth > maxParamDepth {
		return nil, fmt.Errorf("value nested deeper than %d", maxParamDepth)
	}
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.String:
		return string(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("number %d out of range", uint64(x))
		}
		return int64(x), nil
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", f)
		}
		return commitlayer.NormalizeValue(f)
	case traits.Mapper:
		out := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %s is not a string", typeName(k))
			}
			e, err := jsonValue(x.Get(k), depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", string(ks), err)
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		out := []any{}
		it := x.Iterator()
		for i := 0; it.HasNext() == types.True; i++ {
			e, err := jsonValue(it.Next(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("gave %s, not a JSON value (null, bool, number, string, list or map)", typeName(v))
}

// Bindings indexes the bindings of a set of contracts (a tenant's) by tool.
type Bindings struct {
	byTool map[string][]*Contract // contracts in id order
}

// NewBindings indexes cs (nil entries are skipped).
func NewBindings(cs []*Contract) *Bindings {
	b := &Bindings{byTool: map[string][]*Contract{}}
	sorted := slices.DeleteFunc(slices.Clone(cs), func(c *Contract) bool { return c == nil })
	slices.SortStableFunc(sorted, func(a, b *Contract) int { return strings.Compare(a.ID(), b.ID()) })
	for _, c := range sorted {
		for _, t := range c.Tools() {
			b.byTool[t] = append(b.byTool[t], c)
		}
	}
	return b
}

// Bound reports whether some contract binds tool.
func (b *Bindings) Bound(tool string) bool { return b != nil && len(b.byTool[tool]) > 0 }

// Tools lists the bound tools, sorted.
func (b *Bindings) Tools() []string {
	if b == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(b.byTool))
}

// Match evaluates every contract's bindings of tool for one call (see
// Contract.Bind): matches in contract id order, and the errors joined.
func (b *Bindings) Match(tool string, args, result map[string]any) ([]Match, error) {
	if b == nil {
		return nil, nil
	}
	var out []Match
	var errs []error
	for _, c := range b.byTool[tool] {
		m, err := c.Bind(tool, args, result)
		out = append(out, m...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// Fingerprint hashes what a match records (contract, binding, subject,
// params): two calls with one fingerprint ask for the same action, as an
// agent's retry of a failed call does.
func (m Match) Fingerprint() string {
	params, _ := json.Marshal(m.Params) // attrs are JSON values; sorted keys
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", m.Contract.ID(), m.Binding, m.Subject)
	h.Write(params)
	return hex.EncodeToString(h.Sum(nil))
}
