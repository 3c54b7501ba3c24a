package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTwoWorkersShareVerificationsAndSurviveAKill runs two worker processes
// on one task queue: both take verifications; one is killed (SIGKILL) while
// every verification waits on its settlement timer, and the other finishes
// them all, its own and the dead one's, with exactly one provisional and
// one final verdict each.
func TestTwoWorkersShareVerificationsAndSurviveAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs worker processes")
	}
	bin := filepath.Join(t.TempDir(), "commitlayer")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	s := newStack(t, Roles{API: true}) // the API here, the workers in processes of their own
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(bin, "worker")
		cmd.Env = os.Environ() // newStack's t.Setenv: same database, Temporal and task queue
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("worker %d log:\n%s", cmd.Process.Pid, logs.String())
			}
		})
		return cmd
	}
	w1, w2 := startWorker(), startWorker()
	id1, id2 := fmt.Sprintf("%d@", w1.Process.Pid), fmt.Sprintf("%d@", w2.Process.Pid)

	const n = 40
	key := s.tenant()
	ids, _ := s.sleepingPayouts(key, "payout_two", "15s", n)
	// Who ran each verification's first workflow task: both workers share
	// the queue.
	firstBy := map[string]string{}
	for _, id := range ids {
		firstBy[id] = firstWorkflowTaskWorker(t, s, workflowIDFor(s, key, id))
	}
	byW1, byW2 := 0, 0
	for _, who := range firstBy {
		switch {
		case strings.HasPrefix(who, id1):
			byW1++
		case strings.HasPrefix(who, id2):
			byW2++
		}
	}
	require.Equal(t, n, byW1+byW2, "every first task ran on one of the two workers: %v", firstBy)
	require.Positive(t, byW1, "worker 1 took none of %d verifications", n)
	require.Positive(t, byW2, "worker 2 took none of %d verifications", n)
	t.Logf("first workflow tasks: worker 1 %d, worker 2 %d", byW1, byW2)

	require.NoError(t, w1.Process.Kill())
	_ = w1.Wait()
	for _, id := range ids {
		var v actionView
		s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
		require.Len(t, v.History, 1, "action %s settled before worker 1 was killed", id)
	}

	s.requireOneProvisionalOneFinal(key, ids, 90*time.Second)
	// Every workflow completed, and worker 2 ran the timers of worker 1's.
	s.requireAllClosed(key, ids)
	for id, who := range firstBy {
		if strings.HasPrefix(who, id1) {
			last := lastWorkflowTaskWorker(t, s, workflowIDFor(s, key, id))
			require.True(t, strings.HasPrefix(last, id2), "action %s: started on worker 1, finished by %q", id, last)
		}
	}
}

// firstWorkflowTaskWorker and lastWorkflowTaskWorker name the worker
// identity that ran a workflow's first (last) workflow task.
func firstWorkflowTaskWorker(t *testing.T, s *stack, workflowID string) string {
	ids := workflowTaskWorkers(t, s, workflowID)
	require.NotEmpty(t, ids)
	return ids[0]
}

func lastWorkflowTaskWorker(t *testing.T, s *stack, workflowID string) string {
	ids := workflowTaskWorkers(t, s, workflowID)
	require.NotEmpty(t, ids)
	return ids[len(ids)-1]
}

func workflowTaskWorkers(t *testing.T, s *stack, workflowID string) []string {
	t.Helper()
	var out []string
	for _, e := range fetchHistory(t, s, workflowID).GetEvents() {
		if a := e.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			out = append(out, a.GetIdentity())
		}
	}
	return out
}
