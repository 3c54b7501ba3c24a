package contracts

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/commitlayer/commitlayer"
)

// remedy reads a check's `remedy:`; empty when left out.
func (p *parser) remedy(n *yaml.Node, path string) commitlayer.Remedy {
	s := p.str(n, path)
	if s == "" {
		return ""
	}
	r := commitlayer.Remedy(s)
	if !r.Valid() {
		names := make([]string, len(commitlayer.Remedies))
		for i, x := range commitlayer.Remedies {
			names[i] = string(x)
		}
		p.fail(path, n.Line, "unknown remedy %q (expected one of %s)", s, strings.Join(names, ", "))
		return ""
	}
	return r
}

// remedies maps each check that names a remedy to it.
func remedies(s *Spec) map[string]commitlayer.Remedy {
	m := map[string]commitlayer.Remedy{}
	set := func(id string, r commitlayer.Remedy) {
		if r != "" {
			m[id] = r
		}
	}
	for _, r := range s.Policy {
		set(r.ID, r.Remedy)
	}
	for _, l := range s.Limits {
		set(l.ID, l.Remedy)
	}
	for _, e := range s.Effects {
		set(e.ID, e.Remedy)
	}
	for _, f := range s.Forbids {
		set(f.ID, f.Remedy)
	}
	return m
}

// Hint is the remedy for a finding of this contract (commitlayer.HintFor).
func (c *Contract) Hint(f commitlayer.Finding) commitlayer.Remedy {
	return commitlayer.HintFor(f.Code, f.Check, c.remedies)
}
