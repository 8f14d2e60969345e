package results

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// MaxPath is the longest path (in bytes) a system call accepts: PATH_MAX
// on Linux (4096, its terminating NUL included).
const MaxPath = 4096 - 1

// keptAsideRoom is the room KeepAside's suffix takes in a name: the time
// stamp ".20060102T150405Z" and a margin for what makes it unique.
const keptAsideRoom = len(".20060102T150405Z") + 16

// tbFileRoom is the room of a TensorBoard event file's name:
// "events.out.tfevents.<10 digits>.<host name>.<n>" (tensorboard.Create),
// a host name being at most 64 bytes (HOST_NAME_MAX).
const tbFileRoom = len("events.out.tfevents.0123456789.") + 64 + len(".1000")

// RunPaths returns the paths, in the results folder, of what a run with
// key creates, each in its longest form: its results file (runs.jsonl, or a shard's), curve,
// training state, final model, TensorBoard folder and event file, folder
// and file of parameter dumps, and where KeepAside moves them when the run
// is superseded. A name is padded with
// 'x' where the run adds a part it only knows then (a time stamp, the host
// name), so their lengths are upper bounds.
func (l Layout) RunPaths(key string) []string {
	kept := strings.Repeat("x", keptAsideRoom)
	tb := tensorBoardFile(key)
	dump := ParamsStepFile(math.MaxInt64)
	rels := []string{
		"runs-1000of1000.jsonl" + LockSuffix,
		CurveFile(key),
		stateFile(key),
		modelFile(key),
		filepath.Join(tb, strings.Repeat("x", tbFileRoom)),
		filepath.Join(paramsFolder(key), dump),
	}
	out := make([]string, 0, 2*len(rels))
	for _, rel := range rels {
		out = append(out, filepath.Join(l.Dir, rel))
	}
	for _, rel := range []string{
		CurveFile(key) + kept,
		stateFile(key) + kept,
		modelFile(key) + kept,
		filepath.Join(tb+kept, strings.Repeat("x", tbFileRoom)),
		filepath.Join(paramsFolder(key)+kept, dump),
	} {
		out = append(out, filepath.Join(l.Superseded(), rel))
	}
	return out
}

// CheckPaths reports, for the run keys of the experiment, a path a run
// would create that the file system refuses: a name longer than
// MaxFileName bytes (the experiment's name, which names the folder, or a
// run's file) or a path longer than MaxPath. Only the longest key is tried (every name grows with the key). "" keys are skipped.
func (l Layout) CheckPaths(keys []string) error {
	parent, name := filepath.Split(filepath.Clean(l.Dir))
	for _, c := range strings.Split(parent, string(os.PathSeparator)) {
		if len(c) > MaxFileName {
			return fmt.Errorf("results_dir: the folder name %s… is %d bytes long, more than the %d file systems allow; shorten it", c[:24], len(c), MaxFileName)
		}
	}
	if len(name) > MaxFileName {
		return fmt.Errorf("name: %d bytes long, more than the %d file systems allow in a file name (it names the experiment's folder in %s); shorten it",
			len(name), MaxFileName, parent)
	}
	longest := ""
	for _, k := range keys {
		if len(KeyFileStem(k)) > len(KeyFileStem(longest)) {
			longest = k
		}
	}
	if longest == "" {
		return nil
	}
	name, path := "", ""
	for _, p := range l.RunPaths(longest) {
		for _, c := range strings.Split(p, string(os.PathSeparator)) {
			if len(c) > len(name) {
				name = c
			}
		}
		if len(p) > len(path) {
			path = p
		}
	}
	if len(name) > MaxFileName {
		return fmt.Errorf("run %s: its file names would be up to %d bytes long, more than the %d file systems allow; shorten the method or architecture names",
			longest, len(name), MaxFileName)
	}
	if len(path) > MaxPath {
		return fmt.Errorf("run %s: its files' paths would be up to %d bytes long, more than the %d the system allows; choose a shorter results_dir or shorten the experiment, method or architecture names",
			longest, len(path), MaxPath)
	}
	return nil
}
