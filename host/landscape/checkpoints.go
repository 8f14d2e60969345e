package landscape

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/experiment"
)

// Checkpoint metadata keys Run reads: the run a checkpoint belongs to (its
// key in runs.jsonl), its experiment and the members' architectures. Each
// is looked up under the bare name first, then with the "optlab." prefix
// the engine's own keys use.
const (
	metaRunKey     = "run_key"
	metaExperiment = "experiment"
	metaArchs      = "archs"
	metaPrefix     = "optlab."
)

// loadedCheckpoint is a checkpoint file's first member, ready to import.
type loadedCheckpoint struct {
	path, label, arch, runKey, experiment string
	tensors                               map[string]checkpoint.Tensor
}

// loadCheckpoints reads every checkpoint's first member and metadata and
// gives each a unique label (its file name without extension).
func loadCheckpoints(paths []string, arch string, exp *experiment.Experiment) ([]loadedCheckpoint, error) {
	var out []loadedCheckpoint
	used := map[string]int{}
	for _, p := range paths {
		cp, err := loadCheckpoint(p, arch, exp)
		if err != nil {
			return nil, err
		}
		base := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		used[base]++
		cp.label = base
		if n := used[base]; n > 1 {
			cp.label = fmt.Sprintf("%s-%d", base, n)
		}
		out = append(out, cp)
	}
	return out, nil
}

// loadCheckpoint reads the checkpoint at p: its first member's tensors, the
// run and experiment its metadata names, and its architecture (arch, else
// the metadata's first, else the experiment's only one). It has no label.
func loadCheckpoint(p, arch string, exp *experiment.Experiment) (loadedCheckpoint, error) {
	ts, meta, err := checkpoint.Read(p)
	if err != nil {
		return loadedCheckpoint{}, err
	}
	cp := loadedCheckpoint{path: p, runKey: metaValue(meta, metaRunKey), experiment: metaValue(meta, metaExperiment)}
	if cp.tensors, err = statedict.MemberTensors(ts, 0); err != nil {
		return loadedCheckpoint{}, fmt.Errorf("checkpoint %s: %w", p, err)
	}
	cp.arch = arch
	if cp.arch == "" {
		if a := metaValue(meta, metaArchs); a != "" {
			cp.arch, _, _ = strings.Cut(a, ",")
		}
	}
	if cp.arch == "" {
		if cp.arch, err = onlyArch(exp); err != nil {
			return loadedCheckpoint{}, fmt.Errorf("checkpoint %s: %w", p, err)
		}
	}
	return cp, nil
}

// metaValue returns metadata key k, bare or with the "optlab." prefix.
func metaValue(meta map[string]string, k string) string {
	if v, ok := meta[k]; ok {
		return v
	}
	return meta[metaPrefix+k]
}

// onlyArch returns the experiment's architecture when it has exactly one.
func onlyArch(exp *experiment.Experiment) (string, error) {
	archs := map[string]bool{}
	var first string
	for _, spec := range exp.Model.Archs {
		_, members, err := experiment.ParseArch(spec)
		if err != nil {
			return "", err
		}
		for _, m := range members {
			if first == "" {
				first = m
			}
			archs[m] = true
		}
	}
	if len(archs) != 1 {
		return "", fmt.Errorf("the checkpoint does not name its architecture and the experiment has %d; pass --arch", len(archs))
	}
	return first, nil
}

// fileLabel makes a label safe as a file name.
func fileLabel(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-', r == '_', r == '=', r == '+':
			return r
		}
		return '_'
	}, s)
}
