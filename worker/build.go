package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
)

// buildID, when set at link time (-ldflags "-X
// github.com/commitlayer/commitlayer/worker.buildID=…"), is the build ID;
// images built without the repository's .git (docker build) set it.
var buildID string

var (
	buildOnce sync.Once
	buildInfo Build
)

// Build describes this binary: its module version and the build ID its
// workers register as their Worker Deployment version.
type Build struct {
	// Version is the main module's version ("(devel)" from a work tree).
	Version string
	// ID is the build ID: the link-time value, else the VCS revision (+dirty),
	// else the module version, else "exe-" and a digest of the executable.
	ID string
	// Source says where ID came from: ldflags, vcs, module, executable.
	Source string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// CurrentBuild describes the running binary (computed once).
func CurrentBuild() Build {
	buildOnce.Do(func() { buildInfo = readBuild(debug.ReadBuildInfo, os.Executable) })
	return buildInfo
}

func readBuild(read func() (*debug.BuildInfo, bool), exe func() (string, error)) Build {
	b := Build{Version: "(devel)"}
	info, ok := read()
	if ok {
		b.GoVersion = info.GoVersion
		if v := info.Main.Version; v != "" {
			b.Version = v
		}
	}
	if id := strings.TrimSpace(buildID); id != "" {
		b.ID, b.Source = id, "ldflags"
		return b
	}
	if ok {
		var rev string
		var dirty bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			b.ID, b.Source = rev, "vcs"
			if dirty {
				b.ID += "+dirty"
			}
			return b
		}
		if b.Version != "(devel)" && b.Version != "" {
			b.ID, b.Source = b.Version, "module"
			return b
		}
	}
	b.ID, b.Source = "exe-unknown", "executable"
	if path, err := exe(); err == nil {
		if d, err := digestFile(path); err == nil {
			b.ID = "exe-" + d
		}
	}
	return b
}

func digestFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
