package optimtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the file path (conventionally
// testdata/<name>.golden) and fails t with the first differing line. With
// update set (a test's -update flag) it writes got to path instead. An op
// trace written by WithTrace makes a golden file that documents an
// algorithm as the ops it sends:
//
//	var update = flag.Bool("update", false, "rewrite testdata/*.golden")
//
//	func TestTrace(t *testing.T) {
//		var trace bytes.Buffer
//		h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4}))
//		optimtest.MustRun(t, New(), h, 2, optimtest.WithTrace(&trace))
//		optimtest.Golden(t, "testdata/trace.golden", trace.Bytes(), *update)
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
