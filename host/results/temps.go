package results

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TempMaxAge is the age after which a temporary file of an atomic write
// (".NAME.tmp-*") that no lock guards is taken as left by a killed process:
// such writes take seconds at most.
const TempMaxAge = time.Hour

// RemoveTemps is DefaultLockWait().RemoveTemps.
func RemoveTemps(path string) ([]string, error) {
	return DefaultLockWait().RemoveTemps(path)
}

// RemoveTemps removes the temporary files that processes killed in the
// middle of an atomic write (kill -9, a crash) left in the experiment folder
// of the results file at path: under path's Lock, every temporary file of
// the results file and its claims (their writers hold that lock, so none is
// in progress); in the folder, superseded/, checkpoints/, the state folder
// and each run's folder of parameter dumps, those older than TempMaxAge.
// It returns the files removed.
func (w LockWait) RemoveTemps(path string) ([]string, error) {
	unlock, err := w.Lock(path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	dir := filepath.Dir(path)
	var removed []string
	guarded := []string{"." + filepath.Base(path) + ".tmp-", "." + filepath.Base(path) + ClaimsSuffix + ".tmp-"}
	for _, sub := range tempFolders(dir) {
		d := filepath.Join(dir, sub)
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || !strings.HasPrefix(name, ".") || !strings.Contains(name, ".tmp-") {
				continue
			}
			mine := sub == "" && (strings.HasPrefix(name, guarded[0]) || strings.HasPrefix(name, guarded[1]))
			if !mine {
				info, err := e.Info()
				if err != nil || time.Since(info.ModTime()) < TempMaxAge {
					continue
				}
			}
			p := filepath.Join(d, name)
			if os.Remove(p) == nil {
				removed = append(removed, p)
			}
		}
	}
	return removed, nil
}
