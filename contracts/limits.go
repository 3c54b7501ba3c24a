package contracts

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/commitlayer/commitlayer"
)

// total adds int64s exactly (saturating on overflow) until a double
// appears, then as float64.
type total struct {
	isFloat bool
	i       int64
	f       float64
}

func (t *total) add(v ref.Val) error {
	switch n := v.(type) {
	case types.Int:
		if t.isFloat {
			t.f += float64(n)
			return nil
		}
		switch s := t.i + int64(n); {
		case n > 0 && s < t.i:
			t.i = math.MaxInt64
		case n < 0 && s > t.i:
			t.i = math.MinInt64
		default:
			t.i = s
		}
	case types.Uint:
		if uint64(n) > math.MaxInt64 {
			return t.add(types.Double(float64(n)))
		}
		return t.add(types.Int(int64(n)))
	case types.Double:
		if !t.isFloat {
			t.isFloat, t.f = true, float64(t.i)
		}
		t.f += float64(n)
		if math.IsNaN(t.f) {
			return fmt.Errorf("sum is not a number")
		}
	default:
		return fmt.Errorf("sum is %s, not a number", typeName(v))
	}
	return nil
}

func (t *total) exceeds(max int64) bool {
	if t.isFloat {
		return t.f > float64(max)
	}
	return t.i > max
}

func (t *total) String() string {
	if t.isFloat {
		return strconv.FormatFloat(t.f, 'f', -1, 64)
	}
	return strconv.FormatInt(t.i, 10)
}

func (ev *evaluation) checkLimit(l *limit, acts []*actionCtx) {
	id, order, lens := l.spec.ID, l.order, commitlayer.LensPolicy
	e := ev.c.effects[l.effect]
	seen := map[int32]bool{}
	var counted, unsummable []int32
	var sum total
	reason := ""
	for _, x := range acts {
		for _, pos := range ev.matchEffect(x, e).matched {
			if seen[pos] {
				continue
			}
			seen[pos] = true
			if l.spec.Count {
				_ = sum.add(types.Int(1))
				counted = append(counted, pos)
				continue
			}
			x.act.effect = ev.ix.effectVal(pos)
			out, err := run(l.sum, &x.act)
			x.act.effect = nil
			if err == nil {
				err = sum.add(out)
			}
			if err != nil {
				if reason == "" {
					reason = fmt.Sprintf("fact %s: %v", ev.ix.fact(pos).ExternalID, err)
				}
				unsummable = append(unsummable, pos)
				continue
			}
			counted = append(counted, pos)
		}
	}
	slices.SortFunc(counted, ev.ix.cmp)
	slices.SortFunc(unsummable, ev.ix.cmp)
	failed := false
	if sum.exceeds(l.spec.Max) {
		failed = true
		what := "sum of " + oneLine(l.spec.Sum)
		if l.spec.Count {
			what = "count of " + e.spec.ID
		}
		who := string(ev.in.Action.Subject)
		if l.spec.Per == PerAgent {
			who = ev.in.Action.Agent
		}
		ev.add(commitlayer.CodeLimitExceeded, id, lens, order, counted,
			"%s is %s over %s for %s %s (%d %s), more than the max %d",
			what, sum.String(), l.spec.Window, l.spec.Per, who, len(acts), plural(len(acts), "action", "actions"), l.spec.Max)
	}
	if len(unsummable) > 0 {
		failed = true
		ev.add(commitlayer.CodePolicyViolation, id, lens, order, unsummable,
			"%d %s could not be summed with %s: %s", len(unsummable), plural(len(unsummable), "fact", "facts"), oneLine(l.spec.Sum), reason)
	}
	if !failed && !ev.avail[e.kind.Source] {
		ev.addUnavailable(id, lens, order, []string{e.kind.Source})
	}
}
