// Package results reads and writes the results file of optlab experiments:
// one JSON object per finished run, appended to
// results/<experiment>/runs.jsonl.
//
// Each record is appended as one line in one write and synced; a reader
// skips a last line that is not yet complete JSON (an append in progress, or one
// a crash tore, which the next Append cuts off). Appends from several
// processes to the same file are serialised by a lock file next to it (see
// Lock), so none is lost; Claim lets such processes share one experiment's
// runs.
package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sort"
	"time"

	"github.com/optlab/optlab/host/identity"
)

// Run status values.
const (
	// StatusOK marks a run that finished and was evaluated.
	StatusOK = "ok"
	// StatusFailed marks a run that stopped with an error.
	StatusFailed = "failed"
)

// Record is one finished run.
type Record struct {
	// Experiment names the experiment (the TOML file's experiment name).
	Experiment string `json:"experiment"`
	// Key identifies the run; unique per (experiment, method, models,
	// dataset, seed).
	Key string `json:"key"`
	// Method is the row label: the [[method]] name from the TOML, followed
	// by the run's swept values when the method is part of a sweep
	// ("SAM rho=0.05 lr=0.1").
	Method string `json:"method"`
	// Base is the [[method]] name of a run that is part of a sweep ("SAM"),
	// empty otherwise (Method is then the name).
	Base string `json:"base,omitempty"`
	// Setting is the swept values of a run that is part of a sweep, as its
	// label writes them ("rho=0.05 lr=0.1"), empty otherwise.
	Setting string `json:"setting,omitempty"`
	// Plugin is the optimizer plugin's name.
	Plugin string `json:"plugin"`
	// PluginVersion is the optimizer plugin's version.
	PluginVersion string `json:"plugin_version"`
	// Config holds the method hyperparameters and training settings that
	// define the run. It must not contain the seed or anything else that
	// varies between the replicates pooled into one table cell.
	Config map[string]any `json:"config"`
	// ConfigHash is HashConfig(Config); Append fills it when empty.
	ConfigHash string `json:"config_hash"`
	// Identity is the identity version of Config: the rules it was
	// rendered by (identity.Version of the optlab that wrote it); 0 in
	// records written before versions were recorded, which are version 1.
	// It is not hashed. MigratedConfig is Config under this optlab's
	// version, which a run's configuration now is compared with.
	Identity int `json:"identity,omitempty"`
	// Resolved holds, under Config's keys ("params.rho2"), the values the
	// optimizer chose in Configure for hyperparameters whose configured
	// value left the choice to it (optim.Resolver: OT-MDR's rho2 = -1 is
	// 2ρ₁): Config keeps the -1, and Config overlaid with Resolved is what
	// trained. It is not part of the configuration that identifies the run
	// (HashConfig, ConfigDiff): a new run, which knows only what it is
	// configured with, must find its finished record the same. Empty for
	// optimizers that resolve nothing and in records of earlier versions.
	// A run whose optimizer resolves a NaN or ±Inf fails (host/train); a
	// non-finite float that reaches a record anyway is written as the
	// string "NaN", "+Inf" or "-Inf", which JSON can carry.
	Resolved map[string]any `json:"resolved,omitempty"`
	// Dataset names the dataset, e.g. "cifar10".
	Dataset string `json:"dataset"`
	// Arch names the architecture: "resnet18", or "resnet18+mobilenet" for
	// a multi-member run.
	Arch string `json:"arch"`
	// Seed is the run's random seed.
	Seed int64 `json:"seed"`
	// Epochs is the number of epochs trained.
	Epochs int `json:"epochs"`
	// Steps is the number of optimizer steps taken.
	Steps int64 `json:"steps"`
	// Status is StatusOK or StatusFailed.
	Status string `json:"status"`
	// Error is the failure message of a failed run.
	Error string `json:"error,omitempty"`
	// Metrics holds the evaluation metrics (acc, nll, ..., test_loss,
	// train_loss). Only finite values are stored: Append moves the names of
	// NaN and ±Inf entries to Undefined, because JSON cannot carry them.
	Metrics map[string]float64 `json:"metrics"`
	// Undefined lists, sorted, the metrics whose value was NaN or ±Inf when
	// the record was appended.
	Undefined []string `json:"undefined,omitempty"`
	// WallSeconds is the run's total wall-clock time.
	WallSeconds float64 `json:"wall_seconds"`
	// SecondsPerEpoch is the mean training time per epoch; zero means not
	// measured.
	SecondsPerEpoch float64 `json:"seconds_per_epoch"`
	// EvalSet names the held-out set of Evals: "validation" (the split
	// of data.validation) or "test"; "" when Evals is empty.
	EvalSet string `json:"eval_set,omitempty"`
	// Evals are the run's evaluations at the ends of epochs during
	// training (eval.every_epochs, or a plateau schedule's), in order: the
	// curve that time-to-target tables read (host table --target). Empty
	// for runs that evaluated only at the end, and in records made
	// before it existed.
	Evals []EvalPoint `json:"evals,omitempty"`
	// Device describes the accelerator.
	Device string `json:"device"`
	// Libtorch is the libtorch version.
	Libtorch string `json:"libtorch"`
	// BLAS names the BLAS library the run's CPU linear algebra used.
	BLAS string `json:"blas,omitempty"`
	// Numerics holds the determinism and precision switches the run was
	// trained and evaluated with; nil in records of versions before them.
	Numerics *Numerics `json:"numerics,omitempty"`
	// LabelNoise is what the label noise of [data.label_noise] did to the
	// training labels; nil for runs without label noise.
	LabelNoise *LabelNoise `json:"label_noise,omitempty"`
	// GitCommit is the commit of the optlab checkout.
	GitCommit string `json:"git_commit"`
	// Host is the machine's host name.
	Host string `json:"host"`
	// Finished is when the run ended; Append sets it to the current time
	// when zero.
	Finished time.Time `json:"finished"`
}

// EvalPoint is one evaluation of a run during training, at the end of an
// epoch.
type EvalPoint struct {
	// Epoch is the 1-based epoch that ended; Step the optimizer steps so
	// far.
	Epoch int   `json:"epoch"`
	Step  int64 `json:"step"`
	// GradEvals is the gradient evaluations so far, in samples of
	// forward-backward passes (as the metric grad_evals).
	GradEvals int64 `json:"grad_evals"`
	// TrainSeconds is the wall-clock time of training so far, over every
	// resumption, without the time spent evaluating (as AlgoPerf, which
	// does not count evaluations against a submission's time).
	TrainSeconds float64 `json:"train_seconds"`
	// Acc is the accuracy on the record's EvalSet.
	Acc float64 `json:"acc"`
}

// Numerics are a run's determinism and precision switches: the values of
// train.deterministic, train.cudnn_benchmark and train.tf32, all of them,
// defaults included (Config has them only when true, so that the
// configuration of a run at the defaults keeps its hash).
type Numerics struct {
	Deterministic  bool `json:"deterministic"`
	CudnnBenchmark bool `json:"cudnn_benchmark"`
	TF32           bool `json:"tf32"`
}

// LabelNoise is what a run's label noise did to the training labels (all
// of them, before the validation split was held out of them): the
// realised counterpart of the configured data.label_noise.rate.
type LabelNoise struct {
	// Samples is the number of training labels the noise was applied to.
	Samples int `json:"samples"`
	// Flipped is the number of labels it changed.
	Flipped int `json:"flipped"`
	// Fraction is Flipped / Samples.
	Fraction float64 `json:"fraction"`
	// Transition counts the samples by clean label (row) and noisy label
	// (column), classes × classes; the diagonal are the labels kept.
	Transition [][]int `json:"transition"`
}

// MethodName returns the [[method]] name of the run: Base, or Method for a
// run that is not part of a sweep.
func (r *Record) MethodName() string {
	if r.Base != "" {
		return r.Base
	}
	return r.Method
}

// MigratedConfig returns the record's Config as this optlab's identity
// version records configurations (identity.Migrate), in a new map, to be
// compared with the configuration of a run now (ConfigDiff). A record of
// an identity version this optlab does not know (a newer one's) is an
// error.
func (r *Record) MigratedConfig() (map[string]any, error) {
	cfg, err := identity.Migrate(r.Config, r.Identity)
	if err != nil {
		return nil, fmt.Errorf("record %q: %w", r.Key, err)
	}
	return cfg, nil
}

// sameRun reports whether a and b have the same configuration
// (SameConfig), each under this optlab's identity version.
func sameRun(a, b *Record) (bool, error) {
	ca, err := a.MigratedConfig()
	if err != nil {
		return false, err
	}
	cb, err := b.MigratedConfig()
	if err != nil {
		return false, err
	}
	return SameConfig(ca, cb), nil
}

// validate checks the fields every record must have.
func (r *Record) validate() error {
	switch {
	case r.Experiment == "":
		return errors.New("record has no experiment")
	case r.Key == "":
		return errors.New("record has no key")
	case r.Method == "":
		return fmt.Errorf("record %q has no method", r.Key)
	case r.Status != StatusOK && r.Status != StatusFailed:
		return fmt.Errorf("record %q has status %q, want %q or %q", r.Key, r.Status, StatusOK, StatusFailed)
	}
	return nil
}

// prepare returns a copy of rec ready to be written: hash filled and
// checked, non-finite metrics moved to Undefined, Finished set.
func prepare(rec Record, now time.Time) (Record, error) {
	if err := rec.validate(); err != nil {
		return Record{}, err
	}
	h := HashConfig(rec.Config)
	switch rec.ConfigHash {
	case "":
		rec.ConfigHash = h
	case h:
	default:
		return Record{}, fmt.Errorf("record %q: config hash %q does not match its config (%q)", rec.Key, rec.ConfigHash, h)
	}
	if rec.Metrics != nil {
		clean := make(map[string]float64, len(rec.Metrics))
		undef := append([]string(nil), rec.Undefined...)
		for k, v := range rec.Metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				undef = append(undef, k)
				continue
			}
			clean[k] = v
		}
		sort.Strings(undef)
		undef = compactStrings(undef)
		rec.Metrics = clean
		if len(undef) > 0 {
			rec.Undefined = undef
		}
	}
	if rec.Resolved != nil {
		safe := make(map[string]any, len(rec.Resolved))
		for k, v := range rec.Resolved {
			safe[k] = finiteJSON(v)
		}
		rec.Resolved = safe
	}
	if rec.Finished.IsZero() {
		rec.Finished = now
	}
	return rec, nil
}

// finiteJSON returns v with every NaN or ±Inf float in it (also in lists
// and tables) written as a string ("NaN", "+Inf", "-Inf"), which JSON can
// carry.
func finiteJSON(v any) any {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
	case float32:
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(f)
		}
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = finiteJSON(e)
		}
		return out
	case []float64:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = finiteJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = finiteJSON(e)
		}
		return out
	}
	return v
}

// compactStrings removes adjacent duplicates from a sorted slice.
func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Marshal returns the JSON line (without newline) Append would write for
// rec. HTML characters (<, >, &) are not escaped.
func Marshal(rec Record) ([]byte, error) {
	r, err := prepare(rec, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode record %q: %w", r.Key, err)
	}
	if buf.Len() > MaxLine {
		return nil, fmt.Errorf("encode record %q: %d MiB, more than the %d MiB a line of a results file may hold", r.Key, buf.Len()>>20, MaxLine>>20)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Append is DefaultLockWait().Append.
func Append(path string, rec Record) error {
	return DefaultLockWait().Append(path, rec)
}

// Append adds rec as one line to the JSONL file at path, creating the file
// and its directories when missing. The line is appended in one write and
// synced, under the file's Lock, so appends from several processes (or
// goroutines) all land, and the cost of an append does not grow with the
// file. A last line without its newline is completed first when it is
// JSON, and cut off when it is not (what is left of an append that a crash
// tore). Before writing, Append fills an empty ConfigHash (and rejects
// one that does not match Config), moves NaN/±Inf metrics to Undefined and
// sets a zero Finished to the current UTC time.
func (w LockWait) Append(path string, rec Record) error {
	line, err := Marshal(rec)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	unlock, err := w.Lock(path)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	defer unlock()
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	end, tail, err := lastLine(f)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	buf := make([]byte, 0, len(line)+2)
	if len(tail) > 0 {
		if json.Valid(tail) {
			buf = append(buf, '\n')
		} else {
			end -= int64(len(tail))
			if err := f.Truncate(end); err != nil {
				return fmt.Errorf("append to %s: %w", path, err)
			}
		}
	}
	buf = append(append(buf, line...), '\n')
	if _, err := f.WriteAt(buf, end); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}

// lastLine returns the size of f and its last line when that lacks its
// newline (nil otherwise).
func lastLine(f *os.File) (size int64, tail []byte, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	size = st.Size()
	for chunk := int64(4096); ; chunk *= 4 {
		from := max(size-chunk, 0)
		b := make([]byte, size-from)
		if _, err := f.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		if len(b) == 0 || b[len(b)-1] == '\n' {
			return size, nil, nil
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 || from == 0 {
			return size, b[i+1:], nil
		}
	}
}

// Read parses the JSONL files at paths, in order, and returns their records
// in file order. Blank lines are skipped; a line that is not a valid record
// yields an error naming the file and line number.
func Read(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		recs, err := readFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

// readFile parses one JSONL file.
func readFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []Record
	err = readLines(path, f, func(line []byte, unterminated bool) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			if unterminated && !json.Valid(line) {
				return nil // an append in progress, or torn by a crash
			}
			return err
		}
		if err := r.validate(); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readLines calls fn with every non-blank line of r, however long, trimmed
// of surrounding white space, and whether it is a last line without its
// newline. Errors of reading and of fn are returned as "path:line: error",
// path naming r.
func readLines(path string, r io.Reader, fn func(line []byte, unterminated bool) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, errLongLine) {
			return fmt.Errorf("%s: line %d is longer than %d MiB, more than any record: not a results file", path, n, MaxLine>>20)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			if ferr := fn(trimmed, err != nil); ferr != nil {
				return fmt.Errorf("%s:%d: %w", path, n, ferr)
			}
		}
		if err != nil { // io.EOF
			return nil
		}
	}
}

// MaxLine bounds a line of a results file: a record is a few KB (its
// configuration, an error message; Marshal refuses one over MaxLine), so
// a longer line is not one (a binary file, /dev/zero), and reading stops
// there instead of holding it whole.
const MaxLine = 32 << 20

var errLongLine = errors.New("line too long")

// readLine reads one line (with its newline, if any) of at most MaxLine
// bytes; errLongLine past that, io.EOF at the end.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxLine {
			return nil, errLongLine
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// Finished returns the keys of the runs recorded in path with status "ok",
// so that a resumed experiment can skip them. A missing file yields an
// empty map and no error.
func Finished(path string) (map[string]bool, error) {
	done := make(map[string]bool)
	recs, err := Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Status == StatusOK {
			done[r.Key] = true
		}
	}
	return done, nil
}

// Merge combines records from one or more files. Records with the same
// (Experiment, Key) collapse into one: the one with the latest Finished time
// wins, and among equal times the later one in recs. The result keeps the
// order of each key's first appearance.
//
// Merge refuses, with an error naming both runs, to combine runs of the
// same Method within the same experiment, dataset and arch whose
// ConfigHash differs: they would be pooled into one table cell although
// they are different configurations. A record with an empty ConfigHash is
// compared by HashConfig(Config). Records whose hashes differ only because
// one was written by an older optlab, whose config has fewer keys or is of
// an earlier identity version, are the same configuration (SameConfig of
// their MigratedConfig).
func Merge(recs []Record) ([]Record, error) {
	type id struct{ exp, key string }
	index := make(map[id]int)
	var out []Record
	for _, r := range recs {
		k := id{r.Experiment, r.Key}
		i, seen := index[k]
		if !seen {
			index[k] = len(out)
			out = append(out, r)
			continue
		}
		if !r.Finished.Before(out[i].Finished) {
			out[i] = r
		}
	}
	type cell struct{ exp, dataset, arch, method string }
	first := make(map[cell]int)
	for i := range out {
		r := &out[i]
		if r.ConfigHash == "" {
			r.ConfigHash = HashConfig(r.Config)
		}
		c := cell{r.Experiment, r.Dataset, r.Arch, r.Method}
		j, seen := first[c]
		if !seen {
			first[c] = i
			continue
		}
		o := &out[j]
		if o.ConfigHash == r.ConfigHash {
			continue
		}
		same, err := sameRun(o, r)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		if !same {
			return nil, fmt.Errorf("merge: method %q (experiment %q, dataset %q, arch %q) mixes configurations: run %q has config hash %s but run %q has %s",
				r.Method, r.Experiment, r.Dataset, r.Arch, o.Key, o.ConfigHash, r.Key, r.ConfigHash)
		}
	}
	return out, nil
}
