package contracts

import "github.com/commitlayer/commitlayer"

func (ev *evaluation) checkSubjectType() {
	if !ev.c.ActsOn(ev.in.Action.Subject) {
		ev.add(commitlayer.CodePolicyViolation, "subject", commitlayer.LensPolicy, -1, nil,
			"subject type: the action's subject %q is of type %q; the contract is for %q",
			ev.in.Action.Subject, ev.in.Action.Subject.Type(), ev.c.Spec.Subject)
	}
}

func (ev *evaluation) checkPolicy(x *actionCtx) {
	for _, r := range ev.c.policy {
		reads := r.prg.stateReads
		if r.prg.stateDynamic {
			reads = ev.c.Spec.Sources
		}
		down := ev.unavailable(reads...)
		ok, err := runBool(r.prg, &x.act)
		if err != nil && len(down) == 0 {
			// A value the rule needs is missing: with any contract source
			// unavailable it may sit on a subject only that source links
			// (an order's customer), so the rule is unknown, not violated.
			down = ev.unavailable(ev.c.Spec.Sources...)
		}
		switch {
		case err == nil && !ok:
			if r.spec.Message != "" {
				ev.add(commitlayer.CodePolicyViolation, r.spec.ID, commitlayer.LensPolicy, r.order, nil, "%s", r.spec.Message)
			} else {
				ev.add(commitlayer.CodePolicyViolation, r.spec.ID, commitlayer.LensPolicy, r.order, nil, "rule %s is false", oneLine(r.spec.Rule))
			}
		case len(down) > 0:
			ev.addUnavailable(r.spec.ID, commitlayer.LensPolicy, r.order, down)
		case err != nil:
			msg := ""
			if r.spec.Message != "" {
				msg = r.spec.Message + "; "
			}
			ev.add(commitlayer.CodePolicyViolation, r.spec.ID, commitlayer.LensPolicy, r.order, nil,
				"%srule %s could not be evaluated: %v", msg, oneLine(r.spec.Rule), err)
		}
	}
}
