package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/optlab/optlab/internal/atomicfile"
)

// Supersede is DefaultLockWait().Supersede.
func Supersede(path, key, dst string, stale func(Record) bool, aside func() error) (moved int, fresh bool, err error) {
	return DefaultLockWait().Supersede(path, key, dst, stale, aside)
}

// Supersede moves the records of run key that stale reports (made with
// another configuration than the run's current one) from the results file
// at path to the results file dst (appended, its folder created), and
// returns how many it moved. The other lines of path stay as they are. It is
// how a run whose configuration changed keeps its old result without
// counting as finished: dst is read by nothing but the user.
//
// Everything happens under path's Lock, as Append does, and is decided on
// the file as it is then, not as the caller read it earlier: another host
// may have superseded the record and trained the run again since. When path
// holds a record of key with status ok that stale does not report (the run
// has finished with the current configuration), Supersede moves nothing and
// returns fresh true. When it holds nothing to move, it returns 0 and false.
//
// Before the records move, aside (when not nil) is called, still under the
// lock, to move the run's other files (curve, TensorBoard folder, model); if
// it fails, no record moves, so the run stays finished with its old result
// and a later Supersede tries again. The record is copied to dst before it
// is removed from path, and a line dst already holds is not copied again:
// a crash between the two writes leaves the record in both files, and the
// next Supersede completes the move without duplicating it.
func (w LockWait) Supersede(path, key, dst string, stale func(Record) bool, aside func() error) (moved int, fresh bool, err error) {
	unlock, err := w.Lock(path)
	if err != nil {
		return 0, false, fmt.Errorf("supersede %s in %s: %w", key, path, err)
	}
	defer unlock()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("supersede %s in %s: %w", key, path, err)
	}
	var keep bytes.Buffer
	var lines [][]byte
	for line := range bytes.Lines(b) {
		t := bytes.TrimSpace(line)
		var r Record
		if len(t) > 0 && json.Unmarshal(t, &r) == nil && r.Key == key {
			if !stale(r) {
				if r.Status == StatusOK {
					fresh = true
				}
			} else {
				lines = append(lines, t)
				continue
			}
		}
		keep.Write(line)
	}
	if fresh || len(lines) == 0 {
		return 0, fresh, nil
	}
	if aside != nil {
		if err := aside(); err != nil {
			return 0, false, fmt.Errorf("supersede %s: %w", key, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, false, fmt.Errorf("supersede %s: %w", key, err)
	}
	old, err := os.ReadFile(dst)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, false, fmt.Errorf("supersede %s: %w", key, err)
	}
	have := map[string]bool{}
	for l := range bytes.Lines(old) {
		have[string(bytes.TrimSpace(l))] = true
	}
	out := old
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	for _, l := range lines {
		if have[string(l)] {
			continue
		}
		have[string(l)] = true
		out = append(append(out, l...), '\n')
	}
	// The copy first: a crash between the two writes leaves the record in
	// both files, never in neither.
	if len(out) != len(old) {
		if err := atomicfile.Write(dst, out, 0o644); err != nil {
			return 0, false, fmt.Errorf("supersede %s: %w", key, err)
		}
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := atomicfile.Write(path, keep.Bytes(), mode); err != nil {
		return 0, false, fmt.Errorf("supersede %s: %w", key, err)
	}
	return len(lines), false, nil
}
