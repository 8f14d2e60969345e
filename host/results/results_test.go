package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// rec returns a valid record for tests.
func rec(key, method string, seed int64, cfg map[string]any, finished time.Time) Record {
	return Record{
		Experiment: "exp",
		Key:        key,
		Method:     method,
		Plugin:     "sam",
		Config:     cfg,
		Dataset:    "cifar10",
		Arch:       "resnet18",
		Seed:       seed,
		Epochs:     2,
		Steps:      100,
		Status:     StatusOK,
		Metrics:    map[string]float64{"acc": 0.9, "nll": 0.3},
		Finished:   finished,
	}
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestHashConfig(t *testing.T) {
	base := map[string]any{"rho": 0.05, "epochs": int64(200), "nested": map[string]any{"b": 1, "a": []any{1, "x"}}}
	tests := []struct {
		name string
		a, b map[string]any
		same bool
	}{
		{"identical", base, map[string]any{"epochs": int64(200), "rho": 0.05, "nested": map[string]any{"a": []any{1, "x"}, "b": 1}}, true},
		{"int vs float", map[string]any{"e": int64(200)}, map[string]any{"e": 200.0}, true},
		{"json number", map[string]any{"e": 200, "r": 0.05}, map[string]any{"e": json.Number("200"), "r": json.Number("0.05")}, true},
		{"nil vs empty", nil, map[string]any{}, true},
		{"value differs", map[string]any{"rho": 0.05}, map[string]any{"rho": 0.1}, false},
		{"key differs", map[string]any{"rho": 0.05}, map[string]any{"rh0": 0.05}, false},
		{"string vs number", map[string]any{"rho": "1"}, map[string]any{"rho": 1}, false},
		{"nested order", map[string]any{"l": []any{1, 2}}, map[string]any{"l": []any{2, 1}}, false},
		{"nan allowed", map[string]any{"x": math.NaN()}, map[string]any{"x": math.NaN()}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ha, hb := HashConfig(tc.a), HashConfig(tc.b)
			if len(ha) != 16 {
				t.Fatalf("hash %q has length %d, want 16", ha, len(ha))
			}
			if (ha == hb) != tc.same {
				t.Fatalf("HashConfig(%v)=%s, HashConfig(%v)=%s, want same=%v", tc.a, ha, tc.b, hb, tc.same)
			}
		})
	}
}

func TestHashConfigJSONRoundTrip(t *testing.T) {
	cfg := map[string]any{"rho1": 0.05, "rho2": 0.1, "epochs": 200, "batch": int64(128), "nesterov": true,
		"schedule": map[string]any{"kind": "cosine", "warmup": 0}, "members": []string{"resnet18", "mobilenet"}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if HashConfig(cfg) != HashConfig(back) {
		t.Fatalf("hash changed across JSON round trip: %s vs %s", HashConfig(cfg), HashConfig(back))
	}
}

func TestAppendRead(t *testing.T) {
	dir := t.TempDir()
	path := NewLayout(filepath.Join(dir, "results"), "exp").Runs()
	r1 := rec("k1", "SAM", 1, map[string]any{"rho": 0.05}, t0)
	r2 := rec("k2", "SAM", 2, map[string]any{"rho": 0.05}, time.Time{})
	r2.Status = StatusFailed
	r2.Error = "boom"
	r2.Metrics = map[string]float64{"acc": 0.5, "train_loss": math.NaN(), "nll": math.Inf(1)}
	for _, r := range []Record{r1, r2} {
		if err := Append(path, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d records, want 2", len(got))
	}
	if got[0].ConfigHash != HashConfig(r1.Config) || got[0].Metrics["acc"] != 0.9 || !got[0].Finished.Equal(t0) {
		t.Errorf("record 1 round trip: %+v", got[0])
	}
	if got[1].Finished.IsZero() {
		t.Error("Append did not set Finished")
	}
	if want := []string{"nll", "train_loss"}; strings.Join(got[1].Undefined, ",") != strings.Join(want, ",") {
		t.Errorf("Undefined = %v, want %v", got[1].Undefined, want)
	}
	if len(got[1].Metrics) != 1 || got[1].Error != "boom" {
		t.Errorf("record 2 round trip: %+v", got[1])
	}
	if r2.Metrics["nll"] == 0 || len(r2.Metrics) != 3 {
		t.Error("Append modified the caller's metrics map")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte("\n")); n != 2 {
		t.Errorf("file has %d lines, want 2", n)
	}
	for _, field := range []string{`"plugin_version":`, `"config_hash":`, `"seconds_per_epoch":`, `"git_commit":`, `"wall_seconds":`} {
		if !bytes.Contains(raw, []byte(field)) {
			t.Errorf("file lacks snake_case field %s", field)
		}
	}
	if bytes.Count(raw, []byte(`"error":`)) != 1 {
		t.Error("error field should be omitted when empty")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{FileName, FileName + ".lock"}; !slices.Equal(names, want) {
		t.Errorf("directory holds %v, want only %v (temp files left?)", names, want)
	}
}

func TestAppendAtomicity(t *testing.T) {
	// After every append the file parses completely, and an append that
	// fails leaves it untouched.
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.jsonl")
	for i := range 20 {
		r := rec("k"+string(rune('a'+i)), "SAM", int64(i), map[string]any{"rho": 0.05}, t0)
		if err := Append(path, r); err != nil {
			t.Fatal(err)
		}
		got, err := Read(path)
		if err != nil {
			t.Fatalf("after append %d: %v", i, err)
		}
		if len(got) != i+1 {
			t.Fatalf("after append %d: %d records", i, len(got))
		}
	}
	before, _ := os.ReadFile(path)
	bad := rec("", "SAM", 1, nil, t0)
	if err := Append(path, bad); err == nil {
		t.Fatal("Append accepted a record without key")
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("failed Append changed the file")
	}
	// A file whose last line lacks its newline gets one before the new line.
	if err := os.WriteFile(path, bytes.TrimSuffix(before, []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, rec("z", "SAM", 1, map[string]any{"rho": 0.05}, t0)); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path); err != nil || len(got) != 21 {
		t.Fatalf("Read after newline repair: %d records, %v", len(got), err)
	}
}

func TestAppendValidation(t *testing.T) {
	good := rec("k", "SAM", 1, map[string]any{"rho": 0.05}, t0)
	tests := []struct {
		name   string
		mutate func(*Record)
		want   string
	}{
		{"no experiment", func(r *Record) { r.Experiment = "" }, "no experiment"},
		{"no key", func(r *Record) { r.Key = "" }, "no key"},
		{"no method", func(r *Record) { r.Method = "" }, "no method"},
		{"bad status", func(r *Record) { r.Status = "done" }, "status"},
		{"hash mismatch", func(r *Record) { r.ConfigHash = "0123456789abcdef" }, "does not match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.mutate(&r)
			err := Append(filepath.Join(t.TempDir(), "runs.jsonl"), r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := Marshal(rec("k", "SAM", 1, nil, t0))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"bad json", string(good) + "\n\n{not json\n", ":3:"},
		{"truncated", string(good) + "\n" + string(good[:20]) + "\n", ":2:"},
		{"invalid record", string(good) + "\n" + `{"experiment":"e","key":"k","method":"m","status":"weird"}` + "\n", ":2: record \"k\" has status"},
		{"wrong type", `{"experiment":"e","key":"k","method":"m","status":"ok","seed":"x"}`, ":1:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Read(p)
			if err == nil || !strings.Contains(err.Error(), p+tc.want) {
				t.Fatalf("err = %v, want containing %q", err, p+tc.want)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "missing.jsonl")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want fs.ErrNotExist", err)
	}
	// A read error names the file and line too.
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), dir+":1: ") {
		t.Fatalf("reading a directory: err = %v, want one naming %s:1", err, dir)
	}
}

// TestReadLongLine checks that a line longer than any buffer (here 20 MiB,
// far over bufio.Scanner's default 64 KiB, under MaxLine) is read, and that
// an error on the line after it still names the file and line.
func TestReadLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	small, err := Marshal(rec("a", "SAM", 1, nil, t0))
	if err != nil {
		t.Fatal(err)
	}
	big := `{"experiment":"exp","key":"big","method":"SAM","status":"ok","config":{"blob":"` + strings.Repeat("x", 20<<20) + `"}}`
	if err := os.WriteFile(path, []byte(string(small)+"\n"+big+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Key != "big" || len(got[1].Config["blob"].(string)) != 20<<20 {
		t.Fatalf("read %d records", len(got))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("{oops\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path+":3: ") {
		t.Fatalf("err = %v, want one naming %s:3", err, path)
	}
}

func TestFinished(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.jsonl")
	done, err := Finished(path)
	if err != nil || len(done) != 0 {
		t.Fatalf("missing file: %v, %v", done, err)
	}
	ok := rec("a", "SAM", 1, nil, t0)
	failed := rec("b", "SAM", 2, nil, t0)
	failed.Status = StatusFailed
	for _, r := range []Record{ok, failed} {
		if err := Append(path, r); err != nil {
			t.Fatal(err)
		}
	}
	done, err = Finished(path)
	if err != nil {
		t.Fatal(err)
	}
	if !done["a"] || done["b"] || len(done) != 1 {
		t.Fatalf("Finished = %v, want only a", done)
	}
}

func TestMerge(t *testing.T) {
	cfgA := map[string]any{"rho": 0.05}
	cfgB := map[string]any{"rho": 0.1}
	older := rec("k1", "SAM", 1, cfgA, t0)
	older.Status = StatusFailed
	newer := rec("k1", "SAM", 1, cfgA, t0.Add(time.Hour))
	other := rec("k2", "SAM", 2, cfgA, t0)
	ot := rec("k3", "OT-MDR", 1, cfgB, t0)
	tests := []struct {
		name     string
		in       []Record
		wantKeys []string
		check    func(t *testing.T, out []Record)
		wantErr  string
	}{
		{"identical duplicates collapse", []Record{other, ot, other, ot}, []string{"k2", "k3"}, nil, ""},
		{"newest wins regardless of order", []Record{newer, other, older}, []string{"k1", "k2"},
			func(t *testing.T, out []Record) {
				if out[0].Status != StatusOK {
					t.Errorf("kept the older record: %+v", out[0])
				}
			}, ""},
		{"equal time keeps later", []Record{other, func() Record { r := other; r.Metrics = map[string]float64{"acc": 1}; return r }()}, []string{"k2"},
			func(t *testing.T, out []Record) {
				if out[0].Metrics["acc"] != 1 {
					t.Errorf("kept the earlier record")
				}
			}, ""},
		{"same key other experiment kept", []Record{other, func() Record { r := other; r.Experiment = "exp2"; return r }()}, []string{"k2", "k2"}, nil, ""},
		{"mixed config refused", []Record{other, func() Record { r := rec("k9", "SAM", 9, cfgB, t0); return r }()}, nil, nil,
			`method "SAM" (experiment "exp", dataset "cifar10", arch "resnet18") mixes configurations: run "k2"`},
		{"mixed config other arch ok", []Record{other, func() Record { r := rec("k9", "SAM", 9, cfgB, t0); r.Arch = "wrn28"; return r }()}, []string{"k2", "k9"}, nil, ""},
		{"mixed config other dataset ok", []Record{other, func() Record { r := rec("k9", "SAM", 9, cfgB, t0); r.Dataset = "cifar100"; return r }()}, []string{"k2", "k9"}, nil, ""},
		{"superseded config ok", []Record{rec("k1", "SAM", 1, cfgB, t0), newer}, []string{"k1"}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Merge(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `run "k9"`) {
					t.Fatalf("err = %v, want containing %q and both keys", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range out {
				keys = append(keys, r.Key)
			}
			if strings.Join(keys, ",") != strings.Join(tc.wantKeys, ",") {
				t.Fatalf("keys = %v, want %v", keys, tc.wantKeys)
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
}

func TestMergeShards(t *testing.T) {
	// Two shard files holding the same run collapse after Read+Merge.
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	r := rec("k1", "SAM", 1, map[string]any{"rho": 0.05, "epochs": 200}, t0)
	for _, p := range []string{a, b} {
		if err := Append(p, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := Append(b, rec("k2", "SAM", 2, map[string]any{"rho": 0.05, "epochs": 200}, t0)); err != nil {
		t.Fatal(err)
	}
	recs, err := Read(a, b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Merge(recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("merged %d records, want 2", len(out))
	}
}

// TestAppendAppends (hardening 26, also seen): Append adds its line to the
// file in place, not by reading and rewriting the whole file (20k records
// made every run 15 times slower); a torn last line (a crash in the middle
// of an append) is skipped by Read and cut off by the next Append.
func TestAppendAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := Append(path, rec("a", "SAM", 1, nil, t0)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	if err := Append(path, rec("b", "SAM", 2, nil, t0)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("Append replaced the file instead of appending to it")
	}
	b, _ := os.ReadFile(path)
	torn := append(append([]byte{}, b...), b[:len(b)/3]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path); err != nil || len(got) != 2 {
		t.Fatalf("Read of a file with a torn last line: %d records, %v; want 2 and no error", len(got), err)
	}
	if err := Append(path, rec("c", "SAM", 3, nil, t0)); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || len(got) != 3 || got[2].Key != "c" {
		t.Fatalf("after an append to a torn file: %v, %v; want a, b, c", got, err)
	}
	// A torn line in the middle is an error, as before.
	if err := os.WriteFile(path, append(torn, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("Read accepted a broken line followed by a newline")
	}
}
