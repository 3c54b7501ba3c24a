package contracts

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxContractBytes bounds the size of a contract source.
const MaxContractBytes = 1 << 20

// Parse loads one contract strictly (unknown fields are errors) from YAML or
// JSON, validates it and compiles every CEL predicate once. Errors are an
// *Error or a joined list of them (see Errors), in line order.
func Parse(src []byte) (*Contract, error) {
	p := &parser{nodes: map[string]*yaml.Node{}}
	if len(src) > MaxContractBytes {
		p.fail("", 0, "contract is %d bytes, more than the %d allowed", len(src), MaxContractBytes)
		return nil, p.err()
	}
	root, err := readDocument(src)
	if err != nil {
		p.errs = append(p.errs, err)
		return nil, p.err()
	}
	spec := p.spec(root)
	c := p.build(spec)
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// readDocument parses exactly one YAML (or JSON) document into a node tree.
func readDocument(src []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &Error{Field: "yaml", Reason: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Field: "yaml", Line: 1, Reason: "contract is empty"}
		}
		return nil, yamlError(err, src)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &Error{Field: "yaml", Line: extra.Line, Reason: "a contract file holds one document; found another"}
	case !errors.Is(err, io.EOF):
		return nil, yamlError(err, src)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{Field: "yaml", Line: 1, Reason: "contract is empty"}
	}
	return doc.Content[0], nil
}

// yamlError turns a yaml.v3 error into an *Error with its line, kept within
// the source: yaml.v3 reports parser errors ("did not find expected …")
// 0-based, scanner errors 1-based.
func yamlError(err error, src []byte) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if strings.HasPrefix(m[2], "did not find expected") {
			line++
		}
		lines := bytes.Count(src, []byte("\n"))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			lines++
		}
		line = max(1, min(line, lines))
		return &Error{Field: "yaml", Line: line, Reason: m[2]}
	}
	return &Error{Field: "yaml", Reason: strings.TrimPrefix(msg, "yaml: ")}
}

// parser walks the node tree by hand, so every field keeps its line and
// unknown or duplicate keys are caught.
type parser struct {
	id    string
	errs  []error
	nodes map[string]*yaml.Node // field path → value node ("" is the root)
}

func (p *parser) fail(field string, line int, format string, args ...any) {
	p.errs = append(p.errs, &Error{Field: field, Line: line, Reason: fmt.Sprintf(format, args...)})
}

// err stamps the contract id on every error, sorts them by line and joins.
func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	for _, e := range p.errs {
		if ce, ok := e.(*Error); ok && ce.Contract == "" {
			ce.Contract = p.id
		}
	}
	sort.SliceStable(p.errs, func(i, j int) bool {
		a, _ := p.errs[i].(*Error)
		b, _ := p.errs[j].(*Error)
		return a != nil && b != nil && a.Line < b.Line
	})
	if len(p.errs) == 1 {
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}

// line returns the line of path's node, or of its closest recorded parent.
func (p *parser) line(path string) int {
	for {
		if n, ok := p.nodes[path]; ok {
			return n.Line
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			if n, ok := p.nodes[""]; ok {
				return n.Line
			}
			return 0
		}
		path = path[:i]
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fields reads a mapping, reporting bad keys, and records each value node by path.
func (p *parser) fields(n *yaml.Node, path string, known ...string) map[string]*yaml.Node {
	if !p.usable(n, path) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(cmp.Or(path, "contract"), n.Line, "must be a mapping (key: value), got %s", describe(n))
		return nil
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(cmp.Or(path, "contract"), k.Line, "keys must be plain names")
			continue
		}
		if k.Value == "" {
			p.fail(cmp.Or(path, "contract"), k.Line, "empty field name")
			continue
		}
		name := join(path, k.Value)
		if !slices.Contains(known, k.Value) {
			p.fail(name, k.Line, "unknown field (expected one of %s)", strings.Join(known, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.fail(name, k.Line, "field given twice")
			continue
		}
		out[k.Value] = v
		p.nodes[name] = v
	}
	return out
}

// usable rejects aliases (a contract is small; aliases could make walking it
// quadratic) and reports a nil node as absent.
func (p *parser) usable(n *yaml.Node, path string) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.AliasNode {
		p.fail(cmp.Or(path, "contract"), n.Line, "YAML aliases are not supported in contracts")
		return false
	}
	return true
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	default:
		return "something else"
	}
}

// str reads a scalar as text; numbers and booleans keep their spelling (so
// `rule: true` is the CEL expression "true").
func (p *parser) str(n *yaml.Node, path string) string {
	if !p.usable(n, path) {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.fail(path, n.Line, "must be a string, got %s", describe(n))
		return ""
	}
	return n.Value
}

// scalar reads a scalar of YAML tag as a T, else reports it is not want.
func scalar[T any](p *parser, n *yaml.Node, path, tag, want string) (v T, ok bool) {
	if !p.usable(n, path) {
		return v, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != tag || n.Decode(&v) != nil {
		p.fail(path, n.Line, "must be %s, got %s", want, describe(n))
		var zero T
		return zero, false
	}
	return v, true
}

func (p *parser) integer(n *yaml.Node, path string) (int64, bool) {
	return scalar[int64](p, n, path, "!!int", "an integer")
}

func (p *parser) boolean(n *yaml.Node, path string) bool {
	v, _ := scalar[bool](p, n, path, "!!bool", "true or false")
	return v
}

// optBool reads an optional boolean: nil when left out or not a boolean.
func (p *parser) optBool(n *yaml.Node, path string) *bool {
	if v, ok := scalar[bool](p, n, path, "!!bool", "true or false"); ok {
		return &v
	}
	return nil
}

func (p *parser) duration(n *yaml.Node, path string) (Duration, bool) {
	if !p.usable(n, path) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.fail(path, n.Line, "must be a duration such as 10m, 72h or 3d, got %s", describe(n))
		return 0, false
	}
	d, err := ParseDuration(n.Value)
	if err != nil {
		p.fail(path, n.Line, "%v (write e.g. 10m, 72h or 3d)", err)
		return 0, false
	}
	return Duration(d), true
}

// list returns a sequence's items, recording each under path[i].
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	if !p.usable(n, path) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(path, n.Line, "must be a list, got %s", describe(n))
		return nil
	}
	for i, item := range n.Content {
		p.nodes[fmt.Sprintf("%s[%d]", path, i)] = item
	}
	return n.Content
}

// spec reads the document into a Spec, reporting structural problems.
func (p *parser) spec(root *yaml.Node) Spec {
	p.nodes[""] = root
	// Read the id first so that every error names the contract.
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k, v := root.Content[i], root.Content[i+1]; k.Value == "id" && v.Kind == yaml.ScalarNode && isIdent(v.Value) {
				p.id = v.Value
				break
			}
		}
	}
	f := p.fields(root, "", "id", "kind", "description", "subject", "settlement", "watch", "sources",
		"policy", "limits", "effects", "forbids", "bindings")
	var s Spec
	if f == nil {
		return s
	}
	s.ID = p.str(f["id"], "id")
	s.Kind = ContractKind(p.str(f["kind"], "kind"))
	s.Description = p.str(f["description"], "description")
	s.Subject = p.str(f["subject"], "subject")
	s.Settlement, _ = p.duration(f["settlement"], "settlement")
	s.Watch, _ = p.duration(f["watch"], "watch")
	for i, n := range p.list(f["sources"], "sources") {
		s.Sources = append(s.Sources, p.str(n, fmt.Sprintf("sources[%d]", i)))
	}
	for i, n := range p.list(f["policy"], "policy") {
		path := fmt.Sprintf("policy[%d]", i)
		g := p.fields(n, path, "id", "rule", "message", "remedy")
		s.Policy = append(s.Policy, Rule{
			ID:      p.str(g["id"], path+".id"),
			Rule:    p.str(g["rule"], path+".rule"),
			Message: p.str(g["message"], path+".message"),
			Remedy:  p.remedy(g["remedy"], path+".remedy"),
		})
	}
	for i, n := range p.list(f["limits"], "limits") {
		path := fmt.Sprintf("limits[%d]", i)
		g := p.fields(n, path, "id", "per", "window", "effect", "sum", "count", "max", "remedy")
		l := Limit{
			ID:     p.str(g["id"], path+".id"),
			Per:    Per(p.str(g["per"], path+".per")),
			Effect: p.str(g["effect"], path+".effect"),
			Sum:    p.str(g["sum"], path+".sum"),
			Count:  p.boolean(g["count"], path+".count"),
			Remedy: p.remedy(g["remedy"], path+".remedy"),
		}
		l.Window, _ = p.duration(g["window"], path+".window")
		l.Max, _ = p.integer(g["max"], path+".max")
		s.Limits = append(s.Limits, l)
	}
	for i, n := range p.list(f["effects"], "effects") {
		path := fmt.Sprintf("effects[%d]", i)
		g := p.fields(n, path, "id", "source", "type", "where", "count", "expect", "reversed_by", "orphans", "remedy")
		e := Effect{
			ID:     p.str(g["id"], path+".id"),
			Source: p.str(g["source"], path+".source"),
			Type:   p.str(g["type"], path+".type"),
			Where:  p.str(g["where"], path+".where"),
			Expect: p.str(g["expect"], path+".expect"),
			Remedy: p.remedy(g["remedy"], path+".remedy"),
		}
		e.Orphans = p.optBool(g["orphans"], path+".orphans")
		if v, ok := p.integer(g["count"], path+".count"); ok {
			if v < 1 || v > 1_000_000 {
				p.fail(path+".count", g["count"].Line, "must be between 1 and 1000000 (leave it out for \"at least one\"; use forbids for \"none\")")
			} else {
				e.Count = int(v)
			}
		}
		rp := path + ".reversed_by"
		if h := p.fields(g["reversed_by"], rp, "source", "type", "where"); h != nil {
			e.ReversedBy = &Reversal{
				Source: p.str(h["source"], rp+".source"),
				Type:   p.str(h["type"], rp+".type"),
				Where:  p.str(h["where"], rp+".where"),
			}
		}
		s.Effects = append(s.Effects, e)
	}
	for i, n := range p.list(f["forbids"], "forbids") {
		path := fmt.Sprintf("forbids[%d]", i)
		g := p.fields(n, path, "id", "source", "type", "where", "through", "links_from", "orphans", "remedy")
		var linksFrom []string
		for j, ln := range p.list(g["links_from"], path+".links_from") {
			linksFrom = append(linksFrom, p.str(ln, fmt.Sprintf("%s.links_from[%d]", path, j)))
		}
		s.Forbids = append(s.Forbids, Forbid{
			LinksFrom: linksFrom,
			ID:        p.str(g["id"], path+".id"),
			Source:    p.str(g["source"], path+".source"),
			Type:      p.str(g["type"], path+".type"),
			Where:     p.str(g["where"], path+".where"),
			Through:   p.str(g["through"], path+".through"),
			Orphans:   p.optBool(g["orphans"], path+".orphans"),
			Remedy:    p.remedy(g["remedy"], path+".remedy"),
		})
	}
	s.Bindings = p.bindings(f["bindings"])
	return s
}
