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

// Supersede moves every record of run key from the results file at path to
// the results file dst (appended, its folder created), and returns how many
// it moved. The other lines of path stay as they are. It is how a run whose
// configuration changed keeps its old result without counting as finished:
// dst is read by nothing but the user. It works under path's Lock, as
// Append does.
func Supersede(path, key, dst string) (int, error) {
	unlock, err := Lock(path)
	if err != nil {
		return 0, fmt.Errorf("supersede %s in %s: %w", key, path, err)
	}
	defer unlock()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("supersede %s in %s: %w", key, path, err)
	}
	var keep, moved bytes.Buffer
	n := 0
	for line := range bytes.Lines(b) {
		var r struct {
			Key string `json:"key"`
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && json.Unmarshal(t, &r) == nil && r.Key == key {
			moved.Write(bytes.TrimRight(line, "\n"))
			moved.WriteByte('\n')
			n++
			continue
		}
		keep.Write(line)
	}
	if n == 0 {
		return 0, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	old, err := os.ReadFile(dst)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	// The copy first: a crash between the two writes leaves the record in
	// both files, never in neither.
	if err := atomicfile.Write(dst, append(old, moved.Bytes()...), 0o644); err != nil {
		return 0, fmt.Errorf("supersede %s: %w", key, err)
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := atomicfile.Write(path, keep.Bytes(), mode); err != nil {
		return 0, fmt.Errorf("supersede %s: %w", key, err)
	}
	return n, nil
}
