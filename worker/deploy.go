package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
)

// DefaultDeployment is the product's Worker Deployment name (COMMITLAYER_DEPLOYMENT).
const DefaultDeployment = "commitlayer"

// Deployment is a Worker Deployment version: every CommitLayer worker polls
// as one, so Temporal routes new workflows to the deployment's current (or
// ramping) build and keeps pinned ones on theirs.
type Deployment struct {
	Name    string // the deployment, e.g. "commitlayer"; "" runs unversioned
	BuildID string // this build, e.g. the VCS revision (CurrentBuild().ID)
	// IgnoreMissingQueues: a routing change to this build ignores task queues
	// only the replaced build polls, instead of refusing (e.g. per-process
	// queues of the benchmark, tests, or a fleet that moved queue).
	IgnoreMissingQueues bool
}

// Versioned reports whether workers of d run as a deployment version.
func (d Deployment) Versioned() bool { return d.Name != "" }

// String is d as the CLI writes a version: name.buildID.
func (d Deployment) String() string {
	if !d.Versioned() {
		return "unversioned"
	}
	return d.Name + "." + d.BuildID
}

// Validate checks the names Temporal will accept.
func (d Deployment) Validate() error {
	if !d.Versioned() {
		return nil
	}
	if d.BuildID == "" {
		return errors.New("a Worker Deployment needs a build ID (COMMITLAYER_BUILD_ID)")
	}
	for what, v := range map[string]string{"deployment name (COMMITLAYER_DEPLOYMENT)": d.Name, "build ID (COMMITLAYER_BUILD_ID)": d.BuildID} {
		if len(v) > 255 {
			return fmt.Errorf("%s is %d bytes; at most 255", what, len(v))
		}
		if strings.ContainsAny(v, " \t\r\n") {
			return fmt.Errorf("%s %q contains white space", what, v)
		}
	}
	if strings.Contains(d.Name, ".") {
		return fmt.Errorf("deployment name (COMMITLAYER_DEPLOYMENT) %q may not contain '.'", d.Name)
	}
	return nil
}

func (d Deployment) options() sdkworker.DeploymentOptions {
	if !d.Versioned() {
		return sdkworker.DeploymentOptions{}
	}
	return sdkworker.DeploymentOptions{
		UseVersioning: true,
		Version:       sdkworker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID},
	}
}

// CurrentPolicy says when a worker makes its own build the deployment's
// current version at start (COMMITLAYER_MAKE_CURRENT).
type CurrentPolicy string

const (
	// CurrentIfNone makes the build current only when none is: a fleet's first
	// start needs no extra step, a later rollout is the operator's.
	CurrentIfNone CurrentPolicy = "auto"
	// CurrentAlways makes the build current at once (one machine, one build).
	CurrentAlways CurrentPolicy = "always"
	// CurrentNever leaves routing to the operator.
	CurrentNever CurrentPolicy = "never"
)

// ParseCurrentPolicy reads COMMITLAYER_MAKE_CURRENT ("" is auto).
func ParseCurrentPolicy(s string) (CurrentPolicy, error) {
	switch p := CurrentPolicy(strings.TrimSpace(s)); p {
	case "":
		return CurrentIfNone, nil
	case CurrentIfNone, CurrentAlways, CurrentNever:
		return p, nil
	}
	return "", fmt.Errorf("COMMITLAYER_MAKE_CURRENT is auto, always or never, got %q", s)
}

// MakeCurrent makes d's build the deployment's current version as the policy
// says, once its workers' polls registered it, and reports whether it did.
func MakeCurrent(ctx context.Context, c client.Client, d Deployment, policy CurrentPolicy, identity string) (bool, error) {
	if !d.Versioned() || policy == CurrentNever {
		return false, nil
	}
	h := c.WorkerDeploymentClient().GetHandle(d.Name)
	var changed bool
	err := retryRouting(ctx, func() error {
		var err error
		changed, err = makeCurrentOnce(ctx, h, d, policy, identity)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("make %s current (the server must see this build's workers first): %w", d, err)
	}
	return changed, nil
}

func makeCurrentOnce(ctx context.Context, h client.WorkerDeploymentHandle, d Deployment, policy CurrentPolicy, identity string) (bool, error) {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var token []byte
	switch {
	case err == nil:
		token = desc.ConflictToken
		cur := desc.Info.RoutingConfig.CurrentVersion
		if cur != nil && cur.BuildID == d.BuildID {
			return false, nil
		}
		if cur != nil && policy == CurrentIfNone {
			return false, nil // another build is current: a rollout is the operator's
		}
	default: // NotFound too: no worker has polled yet, retried
		return false, err
	}
	_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
		BuildID: d.BuildID, ConflictToken: token, Identity: identity, IgnoreMissingTaskQueues: d.IgnoreMissingQueues,
	})
	if err != nil {
		return false, err
	}
	return true, nil
}

// retryableRouting: the version is not known yet (no poll reached the server),
// a concurrent change won, or the server is briefly away or slow (a busy one may
// not finish the deployment workflow's update in one call; a retry finds it done).
func retryableRouting(err error) bool {
	if isNotFound(err) {
		return true
	}
	var (
		fp  *serviceerror.FailedPrecondition
		un  *serviceerror.Unavailable
		ab  *serviceerror.Aborted
		de  *serviceerror.DeadlineExceeded
		re  *serviceerror.ResourceExhausted
		ina *serviceerror.InvalidArgument
	)
	switch {
	case errors.As(err, &fp), errors.As(err, &un), errors.As(err, &ab), errors.As(err, &de), errors.As(err, &re):
		return true
	case errors.As(err, &ina):
		// Some servers say "version not found" as InvalidArgument until the first poll.
		return strings.Contains(strings.ToLower(ina.Error()), "not found")
	}
	// One call's own RPC deadline; the caller's ended context stops the retries.
	return errors.Is(err, context.DeadlineExceeded)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// VersionState is one version of a deployment as the server reports it.
type VersionState struct {
	BuildID     string
	Current     bool
	Ramping     bool
	RampPercent float32
	// Drainage is "draining" (pinned workflows still open), "drained", or ""
	// (current, ramping, or not reported yet).
	Drainage string
}

// DeploymentState is a deployment's routing and versions.
type DeploymentState struct {
	Name        string
	Current     string // build ID; "" when none
	Ramping     string // build ID; "" when none
	RampPercent float32
	Versions    []VersionState
}

func drainageWord(s client.WorkerDeploymentVersionDrainageStatus) string {
	switch s {
	case client.WorkerDeploymentVersionDrainageStatusDraining:
		return "draining"
	case client.WorkerDeploymentVersionDrainageStatusDrained:
		return "drained"
	}
	return ""
}

// DescribeDeployment reads a deployment's routing and versions.
func DescribeDeployment(ctx context.Context, c client.Client, name string) (DeploymentState, error) {
	desc, err := c.WorkerDeploymentClient().GetHandle(name).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return DeploymentState{}, fmt.Errorf("describe deployment %s: %w", name, err)
	}
	rc := desc.Info.RoutingConfig
	st := DeploymentState{Name: name, RampPercent: rc.RampingVersionPercentage}
	if rc.CurrentVersion != nil {
		st.Current = rc.CurrentVersion.BuildID
	}
	if rc.RampingVersion != nil {
		st.Ramping = rc.RampingVersion.BuildID
	}
	for _, v := range desc.Info.VersionSummaries {
		vs := VersionState{BuildID: v.Version.BuildID, Drainage: drainageWord(v.DrainageStatus)}
		vs.Current = vs.BuildID == st.Current
		vs.Ramping = vs.BuildID == st.Ramping
		if vs.Ramping {
			vs.RampPercent = st.RampPercent
		}
		st.Versions = append(st.Versions, vs)
	}
	return st, nil
}

// SetCurrent makes d's build the deployment's current version (the previous one
// drains), retrying while its workers are unknown or a concurrent change wins.
func SetCurrent(ctx context.Context, c client.Client, d Deployment, identity string) error {
	h := c.WorkerDeploymentClient().GetHandle(d.Name)
	return retryRouting(ctx, func() error {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
			BuildID: d.BuildID, Identity: identity, IgnoreMissingTaskQueues: d.IgnoreMissingQueues})
		return err
	})
}

// SetRamping sends percent (0–100) of the deployment's new workflows to
// d's build; an empty build ID ends the ramp.
func SetRamping(ctx context.Context, c client.Client, d Deployment, percent float32, identity string) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("ramp percentage %v is not between 0 and 100", percent)
	}
	h := c.WorkerDeploymentClient().GetHandle(d.Name)
	return retryRouting(ctx, func() error {
		_, err := h.SetRampingVersion(ctx, client.WorkerDeploymentSetRampingVersionOptions{
			BuildID: d.BuildID, Percentage: percent, Identity: identity, IgnoreMissingTaskQueues: d.IgnoreMissingQueues})
		return err
	})
}

// WaitDrained waits until no pinned workflow runs on buildID, so its workers may
// stop (auto-upgrade workflows move at their next task).
func WaitDrained(ctx context.Context, c client.Client, name, buildID string, poll time.Duration) error {
	if poll <= 0 {
		poll = time.Second
	}
	h := c.WorkerDeploymentClient().GetHandle(name)
	for {
		d, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
		if err != nil && !retryableRouting(err) {
			return fmt.Errorf("describe version %s.%s: %w", name, buildID, err)
		}
		if err == nil && d.Info.DrainageInfo != nil && d.Info.DrainageInfo.DrainageStatus == client.WorkerDeploymentVersionDrainageStatusDrained {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s.%s to drain: %w", name, buildID, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// routingRetryFor bounds the retries of one routing change.
const routingRetryFor = time.Minute

func retryRouting(ctx context.Context, do func() error) error {
	ctx, cancel := context.WithTimeout(ctx, routingRetryFor)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		err := do()
		if err == nil || !retryableRouting(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
