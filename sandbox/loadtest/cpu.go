package loadtest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/commitlayer/commitlayer/internal/proccpu"
)

// What the load test reads of the machine, from /proc: the CPU time of
// this process and its worker processes, the Temporal server and
// PostgreSQL; the load average; this process's memory.

// cpuMeter measures the CPU each role used from its start.
type cpuMeter struct {
	ws     *workers
	before cpuSnapshot
}

func startCPU(ws *workers) *cpuMeter { return &cpuMeter{ws: ws, before: cpuByRole(ws)} }

// capture renders the CPU used since the meter started, over wall.
func (c *cpuMeter) capture(wall time.Duration) string {
	var sb strings.Builder
	c.report(&sb, wall)
	return sb.String()
}

func (c *cpuMeter) report(w io.Writer, wall time.Duration) {
	used := cpuByRole(c.ws).since(c.before)
	fmt.Fprintf(w, "  CPU over %s (2 cores = 200%%):", wall.Round(time.Millisecond))
	total := 0.0
	for _, role := range []string{"commitlayer", "temporal", "postgres"} {
		d := used[role]
		total += d
		fmt.Fprintf(w, " %s %.1fs (%.0f%%)", role, d, 100*d/wall.Seconds())
	}
	if total > 0 {
		fmt.Fprintf(w, "; Temporal's share of the three: %.0f%%", 100*used["temporal"]/total)
	}
	fmt.Fprintln(w)
}

// cpuSnapshot is the CPU time (seconds) of each process of a role
// ("commitlayer", "temporal", "postgres"), by pid.
type cpuSnapshot map[string]map[int]float64

// since is the CPU each role used between before and s, process by
// process: a process that started meanwhile counts whole, one that exited
// meanwhile (a Postgres backend whose connection closed) counts nothing —
// never a negative figure from a total that lost a process.
func (s cpuSnapshot) since(before cpuSnapshot) map[string]float64 {
	out := map[string]float64{}
	for role, pids := range s {
		for pid, t := range pids {
			if d := t - before[role][pid]; d > 0 {
				out[role] += d
			}
		}
	}
	return out
}

// cpuTotal sums what every role used in a snapshot's window.
func cpuTotal(used map[string]float64) float64 {
	var t float64
	for _, v := range used {
		t += v
	}
	return t
}

// cpuDatabase is the database the load test uses; PostgreSQL's backends
// serving other databases of the same server are not counted.
var cpuDatabase atomic.Value // string

// otherDatabasesBackend reports whether a PostgreSQL process's command
// line ("postgres: 15/main: <user> <database> <host>(<port>) <state>") is
// a client backend of a database other than db. Background processes (the
// checkpointer, the WAL writer, an autovacuum worker) and unrecognised
// lines count as the load test's.
func otherDatabasesBackend(cmdline, db string) bool {
	if db == "" {
		return false
	}
	parts := strings.SplitN(cmdline, ": ", 3)
	if len(parts) < 3 {
		return false
	}
	f := strings.Fields(parts[2])
	if len(f) < 3 || !(strings.HasSuffix(f[2], ")") && strings.Contains(f[2], "(") || f[2] == "[local]") {
		return false
	}
	return f[1] != db
}

// cpuByRole reads the CPU time of this process (and its worker
// processes), the Temporal server and PostgreSQL, process by process.
func cpuByRole(ws *workers) cpuSnapshot {
	temporal := proccpu.Find(func(c string) bool {
		return strings.Contains(c, "temporal") && strings.Contains(c, "start-dev") || // the dev server
			strings.Contains(c, "temporal-server-") && strings.Contains(c, "/server") // Temporal's own server (make up TEMPORAL=server)
	})
	db, _ := cpuDatabase.Load().(string)
	pg := proccpu.Find(func(c string) bool {
		return (strings.HasPrefix(c, "postgres") || strings.Contains(c, "/postgres ")) && !otherDatabasesBackend(c, db)
	})
	out := cpuSnapshot{}
	for role, pids := range map[string][]int{"commitlayer": append([]int{os.Getpid()}, ws.pids()...), "temporal": temporal, "postgres": pg} {
		out[role] = map[int]float64{}
		for _, pid := range pids {
			if d, err := proccpu.Of(pid); err == nil { // a backend may exit meanwhile
				out[role][pid] = d.Seconds()
			}
		}
	}
	return out
}

// loadAverage is the machine's one-minute load average, as printed.
func loadAverage() string {
	load, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(load)); len(f) > 0 {
		return "load average " + f[0]
	}
	return ""
}

// heapMiB returns this process's heap in use after a GC, its goroutines'
// stacks, and its RSS.
func heapMiB() (heap, stacks, rss float64) {
	// A collection, and the pages it freed handed back to the system now
	// rather than by the scavenger later: the RSS is then what the process
	// holds.
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap, stacks = float64(ms.HeapInuse)/(1<<20), float64(ms.StackInuse)/(1<<20)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				rss = kb / 1024
			}
		}
	}
	return heap, stacks, rss
}

// writeHeapProfile writes this process's heap profile (in use after the
// GC heapMiB ran) to dir/heap-<watching>.pb.gz; a no-op without dir.
// `go tool pprof -sample_index=inuse_space -base heap-10.pb.gz
// heap-2010.pb.gz` then shows what the extra verifications hold.
func writeHeapProfile(dir string, watching int) error {
	if dir == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pb.gz", watching)))
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// startIngestProfile starts a CPU profile of one ingest case (and its
// notices' drain) in dir/cpu-ingest-<case>.pb.gz and returns what stops
// it; a no-op without dir.
func startIngestProfile(dir string, ingestCase int) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-ingest-%d.pb.gz", ingestCase)))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile (not beside COMMITLAYER_CPUPROFILE): %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// gcStats is what the garbage collector did between two readings.
type gcStats struct{ before runtime.MemStats }

// startGC collects what ran before (so that a collection it would
// trigger — a mark of every cached verification's heap in this process —
// does not land on what is measured by chance; those that run during it
// are counted) and starts counting.
func startGC() *gcStats {
	runtime.GC()
	g := &gcStats{}
	runtime.ReadMemStats(&g.before)
	return g
}

// String renders the collections, their pauses and the bytes allocated
// since startGC.
func (g *gcStats) String() string {
	var now runtime.MemStats
	runtime.ReadMemStats(&now)
	return fmt.Sprintf("%d garbage collections in this process (%.1f ms of stop-the-world pauses), %.1f MiB allocated",
		now.NumGC-g.before.NumGC, float64(now.PauseTotalNs-g.before.PauseTotalNs)/1e6, mib(int64(now.TotalAlloc-g.before.TotalAlloc)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mib(b int64) float64        { return float64(b) / (1 << 20) }
