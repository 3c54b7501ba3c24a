package contracts

import (
	"fmt"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"go.yaml.in/yaml/v3"
)

// isIdent reports whether s is a contract or check id: [a-z0-9_]{1,128}.
func isIdent(s string) bool {
	return s != "" && len(s) <= 128 && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) < 0
}

func isTypeName(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, " \t\r\n")
}

// validate checks the rules that tie fields together.
func (p *parser) validate(s *Spec) {
	req := p.required
	if req("id", s.ID) && !isIdent(s.ID) {
		p.fail("id", p.line("id"), "%q may only hold a-z, 0-9 and _ (at most 128)", s.ID)
	}
	switch s.Kind {
	case "":
		s.Kind = KindAction
	case KindAction, KindOutcome:
	default:
		p.fail("kind", p.line("kind"), "must be action or outcome, got %q", s.Kind)
	}
	if s.Subject != "" && !isIdent(s.Subject) {
		p.fail("subject", p.line("subject"), "%q is not a subject type (a-z, 0-9 and _, as in order:o_1)", s.Subject)
	}
	if _, given := p.nodes["settlement"]; !given {
		p.fail("settlement", p.line("settlement"), "is required (e.g. 10m)")
	} else if s.Settlement <= 0 && p.parsed("settlement") {
		p.fail("settlement", p.line("settlement"), "must be greater than zero")
	}
	if s.Watch < 0 {
		p.fail("watch", p.line("watch"), "must not be negative")
	}
	if time.Duration(s.Settlement)+time.Duration(s.Watch) > maxDuration {
		p.fail("watch", p.line("watch"), "settlement plus watch is longer than %d days", int(maxDuration.Hours()/24))
	}

	sources := map[string]bool{}
	if len(s.Sources) == 0 {
		if n, given := p.nodes["sources"]; !given || n.Kind == yaml.SequenceNode {
			p.fail("sources", p.line("sources"), "is required: list at least one source")
		}
	}
	for i, src := range s.Sources {
		path := fmt.Sprintf("sources[%d]", i)
		switch {
		case src == "":
		case !commitlayer.ValidName(src):
			p.fail(path, p.line(path), "%q is not a source name (letters, digits, _, - and .)", src)
		case sources[src]:
			p.fail(path, p.line(path), "source %q is listed twice", src)
		}
		sources[src] = true
	}
	source := func(path, v string) {
		if req(path, v) && !sources[v] {
			p.fail(path, p.line(path), "source %q is not in sources (%s)", v, strings.Join(s.Sources, ", "))
		}
	}
	typ := func(path, v string) {
		if req(path, v) && !isTypeName(v) {
			p.fail(path, p.line(path), "%q is not a fact type", v)
		}
	}

	ids := map[string]string{}
	checkID := func(path, id string) {
		if !req(path, id) {
			return
		}
		if !isIdent(id) {
			p.fail(path, p.line(path), "%q may only hold a-z, 0-9 and _ (at most 128)", id)
			return
		}
		if prev, dup := ids[id]; dup {
			p.fail(path, p.line(path), "check id %q is already used by %s", id, prev)
			return
		}
		ids[id] = strings.TrimSuffix(path, ".id")
	}
	for i, r := range s.Policy {
		path := fmt.Sprintf("policy[%d]", i)
		checkID(path+".id", r.ID)
		req(path+".rule", r.Rule)
	}
	effects := map[string]bool{}
	for _, e := range s.Effects {
		effects[e.ID] = true
	}
	for i, l := range s.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		checkID(path+".id", l.ID)
		if req(path+".per", string(l.Per)) && l.Per != PerAgent && l.Per != PerSubject {
			p.fail(path+".per", p.line(path+".per"), "must be agent or subject, got %q", l.Per)
		}
		if _, given := p.nodes[path+".window"]; !given {
			p.fail(path+".window", p.line(path+".window"), "is required (e.g. 24h)")
		} else if l.Window <= 0 && p.parsed(path+".window") {
			p.fail(path+".window", p.line(path+".window"), "must be greater than zero")
		}
		if req(path+".effect", l.Effect) && !effects[l.Effect] {
			p.fail(path+".effect", p.line(path+".effect"), "no effect has id %q", l.Effect)
		}
		switch sumNode, sumGiven := p.nodes[path+".sum"]; {
		case l.Sum != "" && l.Count:
			p.fail(path, p.line(path+".count"), "give either sum or count: true, not both")
		case l.Sum == "" && !l.Count && (!sumGiven || sumNode.Kind == yaml.ScalarNode && sumNode.ShortTag() != "!!null"):
			p.fail(path, p.line(path), "needs sum: <expression> or count: true")
		}
		if _, given := p.nodes[path+".max"]; !given {
			p.fail(path+".max", p.line(path), "is required")
		} else if l.Max < 0 {
			p.fail(path+".max", p.line(path+".max"), "must not be negative")
		}
	}
	for i, e := range s.Effects {
		path := fmt.Sprintf("effects[%d]", i)
		checkID(path+".id", e.ID)
		source(path+".source", e.Source)
		typ(path+".type", e.Type)
		if r := e.ReversedBy; r != nil {
			source(path+".reversed_by.source", r.Source)
			typ(path+".reversed_by.type", r.Type)
		}
	}
	for i, f := range s.Forbids {
		path := fmt.Sprintf("forbids[%d]", i)
		checkID(path+".id", f.ID)
		source(path+".source", f.Source)
		typ(path+".type", f.Type)
		if n, given := p.nodes[path+".through"]; given && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
			switch {
			case f.Through == "":
				p.fail(path+".through", n.Line, "must not be empty (leave it out to look only at the action's subject set)")
			case !isIdent(f.Through):
				p.fail(path+".through", n.Line, "%q is not a subject type (a-z, 0-9 and _, as in customer:c_1)", f.Through)
			}
		}
		for j, src := range f.LinksFrom {
			lp := fmt.Sprintf("%s.links_from[%d]", path, j)
			if f.Through == "" {
				p.fail(lp, p.line(lp), "links_from only means something with through (the sources that link the hub to its subjects)")
				break
			}
			source(lp, src)
		}
	}
	if s.Kind == KindOutcome && len(s.Effects) == 0 {
		p.fail("effects", p.line("effects"), "an outcome contract needs at least one effect")
	}
}

// required reports whether v, read at path, is given; else it reports "is
// required" or "must not be empty" (a wrong type was reported already).
func (p *parser) required(path, v string) bool {
	if v != "" {
		return true
	}
	switch n, given := p.nodes[path]; {
	case !given:
		p.fail(path, p.line(path), "is required")
	case n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null":
		p.fail(path, n.Line, "must not be empty")
	}
	return false
}

// parsed reports whether the duration at path was read without error, so a
// bad value is not reported again as "must be greater than zero".
func (p *parser) parsed(path string) bool {
	n, ok := p.nodes[path]
	if !ok || n.Kind != yaml.ScalarNode {
		return false
	}
	_, err := ParseDuration(n.Value)
	return err == nil
}
