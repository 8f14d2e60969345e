package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/optlab/optlab/internal/atomicfile"
)

// ClaimsSuffix is appended to a results file's path to name the file that
// records which process runs which run, e.g. runs.jsonl.claims. It holds one
// JSON object per claimed run (see Claim).
const ClaimsSuffix = ".claims"

// claim is one line of a claims file: run key is being run by owner since
// the given time.
type claim struct {
	Key   string    `json:"key"`
	Owner string    `json:"owner"`
	Since time.Time `json:"since"`
}

// Claim is DefaultLockWait().Claim.
func Claim(path, key, owner string, stale func(owner string) bool) (bool, error) {
	return DefaultLockWait().Claim(path, key, owner, stale)
}

// Claim lets several processes share the runs of one results file: each
// calls Claim before starting a run and runs it only when Claim returns
// true, so that every run is claimed once. It works under the results
// file's Lock, and records the claim in path+ClaimsSuffix.
//
// Claim returns true when the run key is now owner's: it was unclaimed,
// already owner's, or claimed by an owner for which stale returns true (a
// process that died before finishing the run; OwnerGone checks that on this
// machine), whose claim owner takes over. It returns false when another
// owner holds the claim, and when path already records the run as finished
// with status ok. A nil stale takes no claim over. stale is called with the
// lock held; it must not call this package's locking functions.
//
// owner names the claiming process, normally Owner(). A claim lasts until
// Release; the results file, not the claim, tells that a run is finished.
func (w LockWait) Claim(path, key, owner string, stale func(owner string) bool) (bool, error) {
	if key == "" || owner == "" {
		return false, fmt.Errorf("claim in %s: empty run key %q or owner %q", path, key, owner)
	}
	unlock, err := w.Lock(path)
	if err != nil {
		return false, fmt.Errorf("claim %q in %s: %w", key, path, err)
	}
	defer unlock()
	done, err := finishedOK(path, key)
	if err != nil {
		return false, fmt.Errorf("claim %q: %w", key, err)
	}
	if done {
		return false, nil
	}
	claims, err := readClaims(path + ClaimsSuffix)
	if err != nil {
		return false, fmt.Errorf("claim %q: %w", key, err)
	}
	i := claimIndex(claims, key)
	if i >= 0 {
		holder := claims[i].Owner
		if holder == owner {
			return true, nil
		}
		if stale == nil || !stale(holder) {
			return false, nil
		}
	}
	c := claim{Key: key, Owner: owner, Since: time.Now().UTC()}
	if i >= 0 {
		claims[i] = c
	} else {
		claims = append(claims, c)
	}
	if err := writeClaims(path+ClaimsSuffix, claims); err != nil {
		return false, fmt.Errorf("claim %q: %w", key, err)
	}
	return true, nil
}

// Release is DefaultLockWait().Release.
func Release(path, key, owner string) error {
	return DefaultLockWait().Release(path, key, owner)
}

// Release drops owner's claim on the run key of the results file at path,
// e.g. after the run failed, so that another process may claim it again.
// Releasing a claim that owner does not hold does nothing.
func (w LockWait) Release(path, key, owner string) error {
	unlock, err := w.Lock(path)
	if err != nil {
		return fmt.Errorf("release %q in %s: %w", key, path, err)
	}
	defer unlock()
	claims, err := readClaims(path + ClaimsSuffix)
	if err != nil {
		return fmt.Errorf("release %q: %w", key, err)
	}
	i := claimIndex(claims, key)
	if i < 0 || claims[i].Owner != owner {
		return nil
	}
	claims = append(claims[:i], claims[i+1:]...)
	if err := writeClaims(path+ClaimsSuffix, claims); err != nil {
		return fmt.Errorf("release %q: %w", key, err)
	}
	return nil
}

// Claims is DefaultLockWait().Claims.
func Claims(path string) (map[string]string, error) {
	return DefaultLockWait().Claims(path)
}

// Claims returns the claims recorded for the results file at path, run key
// to owner; an empty map when there are none.
func (w LockWait) Claims(path string) (map[string]string, error) {
	unlock, err := w.Lock(path)
	if err != nil {
		return nil, fmt.Errorf("claims of %s: %w", path, err)
	}
	defer unlock()
	claims, err := readClaims(path + ClaimsSuffix)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(claims))
	for _, c := range claims {
		out[c.Key] = c.Owner
	}
	return out, nil
}

func claimIndex(claims []claim, key string) int {
	for i, c := range claims {
		if c.Key == key {
			return i
		}
	}
	return -1
}

// readClaims parses a claims file; a missing one holds no claims.
func readClaims(path string) ([]claim, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	defer func() { _ = f.Close() }()
	var claims []claim
	err = readLines(path, f, func(line []byte, _ bool) error {
		var c claim
		if err := json.Unmarshal(line, &c); err != nil {
			return err
		}
		if c.Key == "" || c.Owner == "" {
			return errors.New("claim without key or owner")
		}
		if claimIndex(claims, c.Key) >= 0 {
			return fmt.Errorf("run %q claimed twice", c.Key)
		}
		claims = append(claims, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// writeClaims replaces the claims file at path atomically.
func writeClaims(path string, claims []claim) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, c := range claims {
		if err := enc.Encode(c); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// finishedOK reports whether the results file at path records run key with
// status ok (a missing file records nothing). Only the lines that contain
// the key as written are parsed, so that a claim does not cost a parse of
// the whole file; a key that JSON may write escaped is looked for in every
// line.
func finishedOK(path, key string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read results: %w", err)
	}
	defer func() { _ = f.Close() }()
	var needle []byte
	if !strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r >= 0x7f || strings.ContainsRune(`"\<>&`, r) }) {
		needle = []byte(key)
	}
	found := false
	err = readLines(path, f, func(line []byte, unterminated bool) error {
		if needle != nil && !bytes.Contains(line, needle) {
			return nil
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			if unterminated && !json.Valid(line) {
				return nil
			}
			return err
		}
		if r.Key == key && r.Status == StatusOK {
			found = true
		}
		return nil
	})
	return found, err
}
