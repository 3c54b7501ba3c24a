package contracts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
)

// windowText describes the window's end for messages.
func (x *actionCtx) windowText() string {
	if x.bounded {
		return fmt.Sprintf("from %s until %s, when the next action%s was requested", stamp(x.action.RequestedAt), stamp(x.end), idText(x.next.ID))
	}
	return fmt.Sprintf("from %s to %s", stamp(x.action.RequestedAt), stamp(x.end))
}

func idText(id string) string {
	if id == "" {
		return ""
	}
	return " " + id
}

func (ev *evaluation) add(code commitlayer.Code, check string, lens commitlayer.Lens, order int, facts []int32, format string, args ...any) {
	ids := make([]string, 0, len(facts))
	for _, pos := range facts {
		ids = append(ids, ev.ix.fact(pos).ExternalID)
	}
	ev.found = append(ev.found, finding{order: order, Finding: commitlayer.Finding{
		Code: code, Check: check, Lens: lens, Facts: ids, Message: check + ": " + fmt.Sprintf(format, args...),
	}})
}

func (ev *evaluation) addUnavailable(check string, lens commitlayer.Lens, order int, sources []string) {
	parts := make([]string, len(sources))
	for i, s := range sources {
		if _, down := ev.in.Coverage.Unreachable[s]; down {
			parts[i] = s + " is unreachable for this verification"
		} else {
			parts[i] = s + " has never reported"
		}
	}
	ev.add(commitlayer.CodeSourceUnavailable, check, lens, order, nil, "cannot be verified: %s", strings.Join(parts, "; "))
}

func (ev *evaluation) kindList() string {
	var parts []string
	for _, e := range ev.c.effects {
		parts = appendUnique(parts, e.kind.Source+" "+e.kind.Type)
	}
	return strings.Join(parts, ", ")
}

// values lists the effect.<k> and params.<k> values an expect reads, for
// the message: " (effect.amount=2600, params.amount=2500)".
func (ev *evaluation) values(p *program, f *commitlayer.Fact, a *commitlayer.Action) string {
	var parts []string
	for _, k := range p.effectAttrs {
		parts = append(parts, "effect."+k+"="+showValue(lookup(f.Attrs, k)))
	}
	for _, k := range p.paramKeys {
		parts = append(parts, "params."+k+"="+showValue(lookup(a.Params, k)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

type missing struct{}

func lookup(m commitlayer.Attrs, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return missing{}
}

func showValue(v any) string {
	switch x := v.(type) {
	case missing:
		return "(missing)"
	case nil:
		return "null"
	case string:
		return strconv.Quote(cut80(x))
	}
	return cut80(fmt.Sprintf("%v", v))
}

func cut80(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
