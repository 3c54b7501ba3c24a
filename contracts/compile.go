package contracts

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"github.com/commitlayer/commitlayer"
	"go.yaml.in/yaml/v3"
)

// actionFields are the keys of the `action` variable.
var actionFields = []string{"id", "agent", "subject", "subject_type", "subject_id", "requested_at", "claim_status"}

// costLimit stops a predicate running away on huge attrs (nested
// comprehensions over long lists): the evaluation fails with an error.
const costLimit = 1_000_000

type environments struct {
	policy   *cel.Env // params, action, state
	effect   *cel.Env // + effect
	reversal *cel.Env // + original
	binding  *cel.Env // args, result (bindings.go)
}

var celEnvs = sync.OnceValues(func() (*environments, error) {
	object := cel.MapType(cel.StringType, cel.DynType)
	common := []cel.EnvOption{cel.OptionalTypes(), cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(8192), ext.Strings(), ext.Math(), ext.Sets(), ext.Lists()}
	policy, err := cel.NewEnv(append(common,
		cel.Variable("params", object),
		cel.Variable("action", object),
		cel.Variable("state", cel.MapType(cel.StringType, object)))...)
	if err != nil {
		return nil, fmt.Errorf("build CEL environment: %w", err)
	}
	effect, err := policy.Extend(cel.Variable("effect", object))
	if err != nil {
		return nil, fmt.Errorf("build CEL effect environment: %w", err)
	}
	reversal, err := effect.Extend(cel.Variable("original", object))
	if err != nil {
		return nil, fmt.Errorf("build CEL reversal environment: %w", err)
	}
	binding, err := cel.NewEnv(append(common, cel.Variable("args", object), cel.Variable("result", object))...)
	if err != nil {
		return nil, fmt.Errorf("build CEL binding environment: %w", err)
	}
	return &environments{policy: policy, effect: effect, reversal: reversal, binding: binding}, nil
})

// program is one compiled CEL expression and what it reads.
type program struct {
	src   string
	field string
	prg   cel.Program
	// stateReads are the sources read as state.<name>; stateDynamic: state
	// is indexed any other way, so every source is read.
	stateReads   []string
	stateDynamic bool
	// The keys selected as effect.<k>, original.<k> and params.<k>, for messages.
	effectAttrs, originalAttrs, paramKeys []string
}

// resultType is the CEL type an expression must evaluate to.
type resultType int

const (
	boolResult resultType = iota
	numberResult
	stringResult
	anyResult
)

// results says which kinds an expression of a resultType may have, and what it must be.
var results = map[resultType]struct {
	kinds []types.Kind
	must  string
}{
	boolResult:   {[]types.Kind{types.BoolKind, types.DynKind}, "a boolean expression"},
	numberResult: {[]types.Kind{types.IntKind, types.DoubleKind, types.DynKind}, "a number (int or double)"},
	stringResult: {[]types.Kind{types.StringKind, types.DynKind}, "a string expression (giving type:id)"},
}

// compile compiles the expression at field (nil when src is empty),
// reporting errors at the field's line.
func (p *parser) compile(env *cel.Env, field, src string, want resultType, sources map[string]bool) *program {
	if strings.TrimSpace(src) == "" {
		return nil
	}
	node := p.nodes[field]
	lineOf := func(celLine int) int {
		if node == nil {
			return 0
		}
		if celLine < 1 {
			celLine = 1
		}
		if node.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			return node.Line + celLine
		}
		return node.Line + celLine - 1
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		for _, e := range iss.Errors() {
			reason := e.Message
			if strings.Contains(reason, "undeclared reference to 'effect'") {
				reason += " (effect is only defined in effects, forbids and limits)"
			} else if strings.Contains(reason, "undeclared reference to 'original'") {
				reason += " (original is only defined in reversed_by.where)"
			} else if strings.HasPrefix(field, "bindings[") && strings.Contains(reason, "undeclared reference") {
				reason += " (a binding reads only args and result)"
			} else if strings.Contains(reason, "undeclared reference to 'args'") || strings.Contains(reason, "undeclared reference to 'result'") {
				reason += " (args and result are only defined in bindings)"
			}
			if col := e.Location.Column(); col >= 0 {
				reason += fmt.Sprintf(" (column %d)", col+1)
			}
			p.fail(field, lineOf(e.Location.Line()), "%s", reason)
		}
		return nil
	}
	if r, ok := results[want]; ok && !slices.Contains(r.kinds, ast.OutputType().Kind()) {
		p.fail(field, lineOf(1), "must be %s, but its type is %s", r.must, ast.OutputType())
		return nil
	}
	pr := &program{src: src, field: field}
	ok := true
	var stateIdents []int64
	handled := map[int64]bool{}
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if e.AsIdent() == "state" {
				stateIdents = append(stateIdents, e.ID())
			}
		case celast.SelectKind:
			s := e.AsSelect()
			op := s.Operand()
			if op.Kind() != celast.IdentKind {
				return
			}
			name := s.FieldName()
			switch op.AsIdent() {
			case "state":
				handled[op.ID()] = true
				if !sources[name] {
					p.fail(field, lineOf(1), "reads state.%s, but %s is not one of the contract's sources", name, name)
					ok = false
				}
				pr.stateReads = appendUnique(pr.stateReads, name)
			case "action":
				if !slices.Contains(actionFields, name) {
					p.fail(field, lineOf(1), "action has no field %q (it has %s)", name, strings.Join(actionFields, ", "))
					ok = false
				}
			case "params":
				pr.paramKeys = appendUnique(pr.paramKeys, name)
			case "effect":
				pr.effectAttrs = appendUnique(pr.effectAttrs, name)
			case "original":
				pr.originalAttrs = appendUnique(pr.originalAttrs, name)
			}
		}
	}))
	if !ok {
		return nil
	}
	for _, id := range stateIdents {
		if !handled[id] {
			pr.stateDynamic = true
		}
	}
	sort.Strings(pr.stateReads)
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(costLimit))
	if err != nil {
		p.fail(field, lineOf(1), "%v", err)
		return nil
	}
	pr.prg = prg
	return pr
}

// appendUnique appends v to list unless it is there already.
func appendUnique[T comparable](list []T, v T) []T {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// build validates spec and compiles every predicate into a Contract.
func (p *parser) build(spec Spec) *Contract {
	p.validate(&spec)
	envs, err := celEnvs()
	if err != nil {
		p.fail("", 0, "%v", err)
		return nil
	}
	sources := map[string]bool{}
	for _, s := range spec.Sources {
		sources[s] = true
	}
	c := &Contract{Spec: spec, idLine: p.line("id"), sources: sources, remedies: remedies(&spec)}
	effectIndex := map[string]int{}
	for i, e := range spec.Effects {
		if _, dup := effectIndex[e.ID]; !dup {
			effectIndex[e.ID] = i
		}
	}
	order := 0
	for i, r := range spec.Policy {
		path := fmt.Sprintf("policy[%d].rule", i)
		c.policy = append(c.policy, &rule{spec: &c.Spec.Policy[i], order: order,
			prg: p.compile(envs.policy, path, r.Rule, boolResult, sources)})
		order++
	}
	limitsAt := order
	order += len(spec.Limits)
	for i, e := range spec.Effects {
		path := fmt.Sprintf("effects[%d]", i)
		ce := &effect{spec: &c.Spec.Effects[i], order: order,
			where:  p.compile(envs.effect, path+".where", e.Where, boolResult, sources),
			expect: p.compile(envs.effect, path+".expect", e.Expect, boolResult, sources),
			kind:   commitlayer.FactType{Source: e.Source, Type: e.Type},
		}
		if r := e.ReversedBy; r != nil {
			ce.reversal = &commitlayer.FactType{Source: r.Source, Type: r.Type}
			ce.reversalWhere = p.compile(envs.reversal, path+".reversed_by.where", r.Where, boolResult, sources)
		}
		c.effects = append(c.effects, ce)
		order++
	}
	for i, l := range spec.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		cl := &limit{spec: &c.Spec.Limits[i], order: limitsAt + i, effect: -1,
			sum: p.compile(envs.effect, path+".sum", l.Sum, numberResult, sources)}
		if j, ok := effectIndex[l.Effect]; ok {
			cl.effect = j
		}
		c.limits = append(c.limits, cl)
	}
	for i, f := range spec.Forbids {
		path := fmt.Sprintf("forbids[%d]", i)
		c.forbids = append(c.forbids, &forbid{spec: &c.Spec.Forbids[i], order: order,
			where: p.compile(envs.effect, path+".where", f.Where, boolResult, sources),
			kind:  commitlayer.FactType{Source: f.Source, Type: f.Type}, through: f.Through})
		order++
	}
	c.bindings = p.compileBindings(envs.binding, spec.Bindings, sources)
	return c
}
