package curves

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		key          string
		method, arch string
		seed         int64
		ok           bool
	}{
		{"method=SGD/arch=cnn/seed=1", "SGD", "cnn", 1, true},
		{"method=a/b/arch=resnet18*2+mlp/seed=30", "a/b", "resnet18*2+mlp", 30, true},
		{"method=SGD/seed=1", "", "", 0, false},
		{"SGD", "", "", 0, false},
		{"method=SGD/arch=cnn/seed=x", "", "", 0, false},
	}
	for _, tt := range tests {
		m, a, s, err := ParseKey(tt.key)
		if (err == nil) != tt.ok || m != tt.method || a != tt.arch || s != tt.seed {
			t.Errorf("ParseKey(%q) = %q, %q, %d, %v", tt.key, m, a, s, err)
		}
	}
}

// sameRows compares rows with NaN equal to NaN.
func sameRows(a, b []Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		for _, c := range Columns() {
			x, okx := a[i].Value(c)
			y, oky := b[i].Value(c)
			if okx != oky || (okx && x != y) {
				return false
			}
		}
	}
	return true
}

func TestCurveRoundTrip(t *testing.T) {
	path := results.NewLayout(t.TempDir(), "exp").Curve("method=SAM/arch=cnn/seed=2")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	r2 := NaNRow(2, 44)
	r2.LR, r2.TrainLoss, r2.TrainAcc, r2.Seconds = 0.05, 0.25, 0.9, 2.5
	rows := []Row{
		{Epoch: 1, Step: 22, LR: 0.1, TrainLoss: 1.0 / 3, TrainAcc: 0.5, EvalLoss: 0.7, EvalAcc: 0.75, Seconds: 1.25},
		r2,
		{Epoch: 3, Step: 66, LR: 1e-5, TrainLoss: 0.01, TrainAcc: 1, EvalLoss: 0.2, EvalAcc: 0.9375, Seconds: 3.75},
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rows[0]); err == nil {
		t.Error("Append after Close: no error")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if lines[0] != "epoch,step,lr,train_loss,train_acc,test_loss,test_acc,seconds" || lines[2] != "2,44,0.05,0.25,0.9,,,2.5" {
		t.Errorf("file:\n%s", raw)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(got, rows) {
		t.Errorf("read back %+v\nwant %+v", got, rows)
	}
	curves, err := ReadDir(filepath.Dir(filepath.Dir(path)))
	if err != nil {
		t.Fatal(err)
	}
	if len(curves) != 1 || curves[0].Method != "SAM" || curves[0].Arch != "cnn" || curves[0].Seed != 2 || !sameRows(curves[0].Rows, rows) {
		t.Errorf("ReadDir: %+v", curves)
	}
}

func TestDecodeCurve(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Row
		err      string
	}{
		{"reordered columns and extras", "test_acc,epoch,extra\n0.5,1,x\n,2,y\n",
			[]Row{withEvalAcc(NaNRow(1, 0), 0.5), NaNRow(2, 0)}, ""},
		{"no epoch column", "step,lr\n1,2\n", nil, "no epoch column"},
		{"bad number", "epoch,lr\n1,abc\n", nil, "column lr"},
		{"short row", "epoch,lr\n1\n", nil, "1 cells"},
		{"empty", "", nil, "empty file"},
		{"empty epoch", "epoch,lr\n,0.1\n", nil, "empty epoch"},
	}
	for _, tt := range tests {
		got, err := Decode(strings.NewReader(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || !sameRows(got, tt.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func withEvalAcc(r Row, v float64) Row {
	r.EvalAcc = v
	return r
}
