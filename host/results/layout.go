package results

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Layout is one experiment's results folder, <results_dir>/<name>/, and
// the one place that knows where each of its files lives:
//
//	runs.jsonl                     the run records (Append, Read)
//	runs-<i>of<n>.jsonl            the records of shard i of n (host run --shard)
//	runs.jsonl.lock, .claims       the lock and the claims beside each records file
//	curves/<stem>.csv              learning curves (package curves)
//	tb/<stem>/                     TensorBoard event files (eval.tensorboard)
//	state/<stem>.safetensors       resumable training state (train.checkpoint)
//	checkpoints/<stem>.safetensors final models (train.checkpoint)
//	params/<stem>/step-<k>.safetensors  parameters after step k (train.dump_params_every)
//	landscape/                     host landscape's output
//	superseded/                    what runs whose configuration changed left
//
// where <stem> is KeyFileStem of the run's key. A Layout only names paths;
// Store works in them.
type Layout struct {
	// Dir is the experiment's results folder.
	Dir string
}

// Names of the folders and files of a Layout, relative to its Dir.
const (
	// FileName is the records file's name.
	FileName       = "runs.jsonl"
	CurvesDir      = "curves"
	CurveExt       = ".csv"
	TensorBoardDir = "tb"
	StateDir       = "state"
	ModelsDir      = "checkpoints"
	ParamsDir      = "params"
	LandscapeDir   = "landscape"
	SupersededDir  = "superseded"
	tensorExt      = ".safetensors"
)

// NewLayout is the layout of experiment name's results below root
// (results_dir).
func NewLayout(root, name string) Layout {
	return Layout{Dir: filepath.Join(root, name)}
}

// Runs is the experiment's records file, runs.jsonl.
func (l Layout) Runs() string { return filepath.Join(l.Dir, FileName) }

// Shard is the records file of shard i of n (1-based), runs-<i>of<n>.jsonl.
func (l Layout) Shard(i, n int) string {
	return filepath.Join(l.Dir, fmt.Sprintf("runs-%dof%d.jsonl", i, n))
}

// RecordFiles lists the experiment's records files: runs.jsonl and every
// shard's (not the superseded records), sorted.
func (l Layout) RecordFiles() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(l.Dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("records in %s: %w", l.Dir, err)
	}
	return files, nil
}

// Curves is the folder of the learning curves.
func (l Layout) Curves() string { return filepath.Join(l.Dir, CurvesDir) }

// Curve is run key's learning curve, curves/<stem>.csv.
func (l Layout) Curve(key string) string { return filepath.Join(l.Dir, CurveFile(key)) }

// CurveFile is run key's curve relative to the results folder.
func CurveFile(key string) string { return filepath.Join(CurvesDir, KeyFileStem(key)+CurveExt) }

// CurveKey inverts the curve file name of a run key (a folder part of name
// is ignored).
func CurveKey(name string) (string, error) {
	base, ok := strings.CutSuffix(filepath.Base(name), CurveExt)
	if !ok {
		return "", fmt.Errorf("curve file %q: want a %s file", name, CurveExt)
	}
	key, err := KeyFromFileStem(base)
	if err != nil {
		return "", fmt.Errorf("curve file: %w", err)
	}
	return key, nil
}

// TensorBoard is the folder of run key's TensorBoard event files, tb/<stem>.
func (l Layout) TensorBoard(key string) string { return filepath.Join(l.Dir, tensorBoardFile(key)) }

func tensorBoardFile(key string) string { return filepath.Join(TensorBoardDir, KeyFileStem(key)) }

// State is run key's resumable training state, state/<stem>.safetensors.
func (l Layout) State(key string) string { return filepath.Join(l.Dir, stateFile(key)) }

func stateFile(key string) string { return filepath.Join(StateDir, KeyFileStem(key)+tensorExt) }

// Model is run key's final model, checkpoints/<stem>.safetensors.
func (l Layout) Model(key string) string { return filepath.Join(l.Dir, modelFile(key)) }

func modelFile(key string) string { return filepath.Join(ModelsDir, KeyFileStem(key)+tensorExt) }

// Params is the folder of run key's parameter dumps (train
// .dump_params_every), params/<stem>.
func (l Layout) Params(key string) string { return filepath.Join(l.Dir, paramsFolder(key)) }

func paramsFolder(key string) string { return filepath.Join(ParamsDir, KeyFileStem(key)) }

// ParamsStep is run key's parameter dump after step steps (0: before the
// first step), params/<stem>/step-<steps>.safetensors, the number written
// with at least 8 digits so that the files sort by step.
func (l Layout) ParamsStep(key string, steps int64) string {
	return filepath.Join(l.Params(key), ParamsStepFile(steps))
}

// ParamsStepFile is the name of a parameter dump after step steps,
// "step-00000042.safetensors".
func ParamsStepFile(steps int64) string { return fmt.Sprintf("step-%08d%s", steps, tensorExt) }

// Landscape is the default output folder of host landscape.
func (l Layout) Landscape() string { return filepath.Join(l.Dir, LandscapeDir) }

// Superseded is the folder that keeps the records and files of runs whose
// configuration changed.
func (l Layout) Superseded() string { return filepath.Join(l.Dir, SupersededDir) }

// SupersededRecords is the records file of superseded runs.
func (l Layout) SupersededRecords() string { return filepath.Join(l.Dir, SupersededDir, FileName) }

// RunFiles are the files and folders a run makes besides its record,
// relative to the results folder: its curve, final model, TensorBoard
// folder and parameter dumps (the training state is the training's to
// retire).
func RunFiles(key string) []string {
	return []string{CurveFile(key), modelFile(key), tensorBoardFile(key), paramsFolder(key)}
}

// RunFolders are the folders runs create files in, relative to the
// results folder (TensorBoard's only when tensorBoard, the parameter
// dumps' only when dumps).
func RunFolders(tensorBoard, dumps bool) []string {
	subs := []string{CurvesDir, StateDir, ModelsDir, SupersededDir}
	if tensorBoard {
		subs = append(subs, TensorBoardDir)
	}
	if dumps {
		subs = append(subs, ParamsDir)
	}
	return subs
}

// tempFolders are the folders of the results folder dir in which atomic
// writes make temporary files, relative to it: its own and those of the
// records, final models and training states, and each run's folder of
// parameter dumps.
func tempFolders(dir string) []string {
	out := []string{"", SupersededDir, ModelsDir, StateDir, filepath.Join(SupersededDir, StateDir)}
	entries, _ := os.ReadDir(filepath.Join(dir, ParamsDir))
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(ParamsDir, e.Name()))
		}
	}
	return out
}

// KeepAside moves path, a file or folder inside the results folder (if it
// exists), to the same place under superseded/ with the time appended to
// its name, where a run's files go when its configuration changed; it
// returns the new path, or "" when there was none. The name is never one
// that is taken: when something was kept aside under it already (twice in
// one second, or by another host), -2, -3, … is added. The name is
// reserved first (an empty file or folder created exclusively), then path
// is renamed over the reservation, so two hosts never pick the same one.
func (l Layout) KeepAside(path string) (string, error) {
	rel, err := filepath.Rel(l.Dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("keeping %s aside: not inside the results folder %s", path, l.Dir)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return "", nil
	}
	base := filepath.Join(l.Superseded(), rel+"."+time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return "", fmt.Errorf("keeping the old %s aside: %w", rel, err)
	}
	for n := 1; n <= 10000; n++ {
		dst := base
		if n > 1 {
			dst = fmt.Sprintf("%s-%d", base, n)
		}
		if st.IsDir() {
			err = os.Mkdir(dst, 0o755)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
				err = f.Close()
			}
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			// syscall.Rename: os.Rename refuses any folder as the
			// target, also the empty one reserved here.
			if err = syscall.Rename(path, dst); err == nil {
				return dst, nil
			}
			_ = os.Remove(dst)
			err = &os.LinkError{Op: "rename", Old: path, New: dst, Err: err}
		}
		return "", fmt.Errorf("keeping the old %s aside: %w", rel, err)
	}
	return "", fmt.Errorf("keeping the old %s aside: every name %s-N up to 10000 is taken; remove old files from %s", rel, base, l.Superseded())
}
