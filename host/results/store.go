package results

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Store is one host's bookkeeping in an experiment's results folder, the
// life of each run it may train:
//
//	Begin   finished with this configuration? → skip;
//	        finished with another? → its record and files move to superseded/;
//	        claimed by another host? → skip; else claim it (train it)
//	Finish  append the run's record, release the claim
//	Abandon release the claim without a record (the host was interrupted)
//
// Several hosts (processes, machines sharing the folder) may work on one
// experiment at once, each with its own Store: every step that reads and
// changes the records or the claims does so under the records file's Lock,
// on the files as they are then, so each run is trained once and no
// finished record is lost.
type Store struct {
	// Layout is the results folder.
	Layout Layout
	// file is the records file this host appends to: runs.jsonl or its
	// shard's.
	file  string
	owner string
	wait  LockWait
	// done are the runs finished when the store was opened, in any records
	// file of the folder (unsharded or any shard), by key.
	done map[string]finished
	// failed counts the failed records of each run when the store was
	// opened: a run with more now failed in another host since.
	failed map[string]int
}

// Shard selects the records file of a part of the grid (host run --shard
// i/n); the zero value is the whole grid's runs.jsonl.
type Shard struct{ I, N int }

// finished is a run's finished record and the records file holding it.
type finished struct {
	rec  Record
	file string
}

// StoreOptions say how a Store works.
type StoreOptions struct {
	// Shard selects the records file this host appends to.
	Shard Shard
	// Owner names this host in its claims ("": Owner()).
	Owner string
	// Wait says how to wait for the records file's lock when another host
	// holds it (the zero value: DefaultLockTimeout, uninterrupted,
	// silent).
	Wait LockWait
}

// Open opens the results folder for one host: it removes the temporary
// files that interrupted hosts left (RemoveTemps; returned) and reads which
// runs are finished, in every records file of the folder.
func Open(l Layout, o StoreOptions) (s *Store, removed []string, err error) {
	file := l.Runs()
	if o.Shard.N > 0 {
		file = l.Shard(o.Shard.I, o.Shard.N)
	}
	owner := o.Owner
	if owner == "" {
		owner = Owner()
	}
	s = &Store{Layout: l, file: file, owner: owner, wait: o.Wait}
	if removed, err = s.wait.RemoveTemps(file); err != nil {
		return nil, nil, err
	}
	if s.done, s.failed, err = l.finished(); err != nil {
		return nil, removed, err
	}
	return s, removed, nil
}

// File is the records file this host appends to.
func (s *Store) File() string { return s.file }

// finished returns the runs recorded as finished (status ok) in the
// folder's records files, by key (the latest record wins), and the number
// of failed records of each run.
func (l Layout) finished() (map[string]finished, map[string]int, error) {
	files, err := l.RecordFiles()
	if err != nil {
		return nil, nil, err
	}
	done, failed := map[string]finished{}, map[string]int{}
	for _, f := range files {
		recs, err := Read(f)
		if err != nil {
			return nil, nil, err
		}
		for _, rec := range recs {
			switch rec.Status {
			case StatusOK:
				done[rec.Key] = finished{rec, f}
			case StatusFailed:
				failed[rec.Key]++
			}
		}
	}
	return done, failed, nil
}

// Skip says why Begin does not give a run to this host to train.
type Skip int

const (
	// NotSkipped: the run is this host's to train.
	NotSkipped Skip = iota
	// SkipFinished: it is finished with the same configuration.
	SkipFinished
	// SkipFresh: another host has just trained it with this
	// configuration (after superseding its old result).
	SkipFresh
	// SkipClaimed: another host is training it, or has just finished it.
	SkipClaimed
	// SkipFailed: another host has failed it since this store was opened
	// (a diverged run, a crashed plugin): it is not tried again in this
	// invocation; running the grid again retries it.
	SkipFailed
)

// Start is what Begin decided for a run.
type Start struct {
	// Skip is why the run is not this host's; NotSkipped when it is
	// claimed: train it, then Finish or Abandon it.
	Skip Skip
	// Superseded, when the run had finished with another configuration
	// and its record and files were moved aside, is the folder that keeps
	// them; Diff says what changed.
	Superseded string
	Diff       []string
}

// Train reports whether the run is this host's to train.
func (st Start) Train() bool { return st.Skip == NotSkipped }

// Begin decides whether this host trains run key, whose configuration is
// now cfg (the record's Config, of identity.Version), and claims it when it
// does. A finished record's configuration is compared under this version
// (Record.MigratedConfig); a record of a version this optlab does not know
// is an error. A run that finished with another configuration is
// superseded first: its records
// move to superseded/runs.jsonl, its curve, final model and TensorBoard
// folder under superseded/ with the time in their names (KeepAside).
// When ctx is done before the claim, Begin returns its cause.
func (s *Store) Begin(ctx context.Context, key string, cfg map[string]any) (Start, error) {
	var st Start
	if fin, ok := s.done[key]; ok {
		old, err := fin.rec.MigratedConfig()
		if err != nil {
			return st, fmt.Errorf("%s: %w", fin.file, err)
		}
		diff := ConfigDiff(old, cfg)
		if len(diff) == 0 {
			return Start{Skip: SkipFinished}, nil
		}
		// A record of an identity version this optlab does not know is
		// left where it is.
		stale := func(r Record) bool {
			old, err := r.MigratedConfig()
			return err == nil && len(ConfigDiff(old, cfg)) > 0
		}
		aside := func() error {
			for _, f := range RunFiles(key) {
				if _, err := s.Layout.KeepAside(filepath.Join(s.Layout.Dir, f)); err != nil {
					return err
				}
			}
			return nil
		}
		n, fresh, err := s.wait.Supersede(fin.file, key, s.Layout.SupersededRecords(), stale, aside)
		if err != nil {
			return st, err
		}
		if fresh {
			return Start{Skip: SkipFresh}, nil
		}
		if n > 0 {
			st.Superseded, st.Diff = s.Layout.Superseded(), diff
		}
	}
	if ctx.Err() != nil {
		return st, context.Cause(ctx)
	}
	mine, err := s.wait.Claim(s.file, key, s.owner, OwnerGone)
	if err != nil {
		return st, err
	}
	if !mine {
		st.Skip = SkipClaimed
		return st, nil
	}
	n, err := s.failures(key)
	if err != nil {
		return st, joinRelease(err, s.wait.Release(s.file, key, s.owner))
	}
	if n > s.failed[key] {
		st.Skip = SkipFailed
		return st, s.wait.Release(s.file, key, s.owner)
	}
	return st, nil
}

// failures counts the failed records of run key in the folder's records
// files now.
func (s *Store) failures(key string) (int, error) {
	files, err := s.Layout.RecordFiles()
	if err != nil {
		return 0, err
	}
	recs, err := Read(files...)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Key == key && r.Status == StatusFailed {
			n++
		}
	}
	return n, nil
}

// joinRelease returns err, with the error of releasing a claim after it
// when there is one.
func joinRelease(err, rerr error) error {
	if rerr != nil {
		return fmt.Errorf("%w (and releasing the claim: %v)", err, rerr)
	}
	return err
}

// Finish records a run this host trained (whatever its status) and
// releases its claim, waiting for the lock as afterStop says.
func (s *Store) Finish(rec Record) error {
	w := s.afterStop()
	if err := w.Append(s.file, rec); err != nil {
		return fmt.Errorf("saving result of %s: %w", rec.Key, err)
	}
	return w.Release(s.file, rec.Key, s.owner)
}

// Abandon releases the claim on run key without a record: the host was
// interrupted, and another (or this one run again) trains it later. It
// waits for the lock as afterStop says.
func (s *Store) Abandon(key string) error {
	return s.afterStop().Release(s.file, key, s.owner)
}

// StopGrace is how long Finish and Abandon still wait for the records
// file's lock once the store's context is done.
const StopGrace = 3 * time.Second

// afterStop is how Finish and Abandon wait for the lock: as the store's
// LockWait says, except that once its context is done (the host was
// interrupted) they still wait, uninterrupted, for up to StopGrace. The
// other hosts hold the lock for milliseconds at a time, and one Ctrl-C
// often stops several at once; without the grace, a record finished as the
// signal came, or a claim's release, would be dropped whenever another host
// held the lock at that moment (seen: two hosts of one grid stopped
// together left a claim behind). A holder that is stuck still ends the
// wait within StopGrace.
func (s *Store) afterStop() LockWait {
	w := s.wait
	if w.Ctx != nil && w.Ctx.Err() != nil {
		w.Ctx = nil
		w.Timeout = StopGrace
	}
	return w
}

// Records reads every records file of the folder (runs.jsonl and every
// shard's), returning the files and their records.
func (s *Store) Records() ([]string, []Record, error) {
	files, err := s.Layout.RecordFiles()
	if err != nil {
		return nil, nil, err
	}
	recs, err := Read(files...)
	return files, recs, err
}
