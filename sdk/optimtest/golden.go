package optimtest

import (
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// Golden compares got with the file path (conventionally
// testdata/<name>.golden) and fails t with the first differing line. With
// update set (a test's -update flag) it writes got to path instead. An op
// trace written by WithTrace makes a golden file that documents an
// algorithm as the ops it sends; TestTraces does it all:
//
//	var update = flag.Bool("update", false, "rewrite testdata/*.golden")
//
//	func TestTraceGolden(t *testing.T) {
//		optimtest.TestTraces(t, *update,
//			optimtest.TraceCase{Golden: "testdata/trace.golden", New: New, Members: 2})
//	}
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range max(len(gl), len(wl)) {
		var g, w []byte
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if !bytes.Equal(g, w) {
			t.Fatalf("%s differs at line %d (run with -update if the change is meant):\ngot:  %s\nwant: %s", path, i+1, g, w)
		}
	}
}

// TraceCase is one golden op trace of TestTraces: an optimizer run for a
// few steps on the toy MLP (4 hidden units, 64 samples, batches of 16),
// traced with WithTrace and compared with Golden.
type TraceCase struct {
	// Golden is the file, conventionally testdata/trace*.golden.
	Golden string
	// New makes the optimizer.
	New func() optim.Optimizer
	// Params are its hyperparameters (nil: the defaults).
	Params map[string]any
	// Steps defaults to 2, Members to 1, LR to 0.1.
	Steps, Members int
	LR             float64
	// Host are more options of the host (e.g. WithVariational).
	Host []HostOption
}

// TestTraces runs every case as a subtest named by its golden file; with
// update set it rewrites the files.
func TestTraces(t *testing.T, update bool, cases ...TraceCase) {
	for _, c := range cases {
		t.Run(c.Golden, func(t *testing.T) {
			steps, members, lr := cmp.Or(c.Steps, 2), cmp.Or(c.Members, 1), cmp.Or(c.LR, 0.1)
			opts := append([]HostOption{WithBatchSize(16), WithMembers(members)}, c.Host...)
			h := MustHost(t, NewMLP(MLPConfig{Hidden: 4, Samples: 64}), opts...)
			var trace bytes.Buffer
			MustRun(t, c.New(), h, steps, WithLR(lr), WithHParams(c.Params), WithTrace(&trace))
			Golden(t, c.Golden, trace.Bytes(), update)
		})
	}
}
