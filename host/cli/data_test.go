package cli_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/results"
)

// TestSmokeCIFAR runs a CIFAR-10 experiment whose data folder does not
// exist with --smoke: every run trains 2 steps on generated CIFAR-format
// data and succeeds.
func TestSmokeCIFAR(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "smoke", Arch: "cnn", Batch: 128, Seeds: "[1, 2]",
		Data:    `dataset = "cifar10"` + "\ndir = \"" + filepath.Join(dir, "no-such-cifar") + `"`,
		Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "SAM", Plugin: "sam"}}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	r := host(t, "run", "--smoke", "-q", "--plugins", pluginDir, "--results", res, exp)
	if r.code != 0 {
		t.Fatalf("exit code %d", r.code)
	}
	recs := readRecords(t, results.NewLayout(res, s.Name).Runs())
	if len(recs) != 4 {
		t.Errorf("%d records, want 4", len(recs))
	}
	for key, rec := range recs {
		if rec.Status != results.StatusOK || rec.Steps != 2 || rec.Dataset != "cifar10" {
			t.Errorf("%s: status %q, %d steps, dataset %q; want ok, 2, cifar10", key, rec.Status, rec.Steps, rec.Dataset)
		}
		if bs := rec.Config["train.batch_size"]; bs != int64(8) && bs != float64(8) {
			t.Errorf("%s: batch size %v, want the smoke cap 8", key, bs)
		}
	}
	for _, m := range []string{"SGD", "SAM"} {
		if tableRow(r.stdout, m) == "" {
			t.Errorf("the table has no row %q:\n%s", m, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no-such-cifar")); err == nil {
		t.Errorf("--smoke created the experiment's data folder")
	}
}

// cifarArchive returns a cifar-10-binary.tar.gz holding generated CIFAR-10
// files in the published layout.
func cifarArchive(t *testing.T) []byte {
	t.Helper()
	src := t.TempDir()
	if err := data.WriteCIFAR(src, data.CIFAR10, 8, 16, 1); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	const sub = "cifar-10-batches-bin/"
	if err := tw.WriteHeader(&tar.Header{Name: sub, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: sub + e.Name(), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDataGet downloads a generated CIFAR-10 archive from a test server with
// `host data get`, verifying its MD5.
func TestDataGet(t *testing.T) {
	archive := cifarArchive(t)
	sum := md5.Sum(archive)
	good := hex.EncodeToString(sum[:])
	const published = "c32a1d4ab5d03f1284b67883e8d87530"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cifar/cifar-10-binary.tar.gz":
			w.Write(archive)
		case "/short/cifar-10-binary.tar.gz":
			w.Write(archive[:len(archive)/2])
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	tests := []struct {
		name string
		args []string // after "data get cifar10 --dir DIR"
		// want is in stdout on success, in the one error message otherwise.
		want   []string
		wantOK bool
	}{
		{"matching --md5", []string{"--url", srv.URL + "/cifar", "--md5", good},
			[]string{"cifar10 is in DIR/cifar-10-batches-bin"}, true},
		{"published MD5", []string{"--url", srv.URL + "/cifar/"},
			[]string{"host: get cifar10: " + srv.URL + "/cifar/cifar-10-binary.tar.gz: MD5 " + good + " does not match the expected " + published + " (corrupt or incomplete download)"}, false},
		{"truncated download", []string{"--url", srv.URL + "/short", "--md5", good},
			[]string{"host: get cifar10: " + srv.URL + "/short/cifar-10-binary.tar.gz: MD5 ", "does not match the expected " + good}, false},
		{"not found", []string{"--url", srv.URL + "/nothing", "--md5", good},
			[]string{"host: get cifar10: download " + srv.URL + "/nothing/cifar-10-binary.tar.gz: 404 Not Found"}, false},
		{"unknown dataset", []string{"--url", srv.URL + "/cifar"},
			[]string{`host: get: unknown CIFAR dataset "cifar11"`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			name := "cifar10"
			if tt.name == "unknown dataset" {
				name = "cifar11"
			}
			r := host(t, append([]string{"data", "get", name, "--dir", dir}, tt.args...)...)
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = strings.ReplaceAll(w, "DIR", dir)
			}
			if !tt.wantOK {
				wantError(t, r, want...)
				// A failed download leaves the folder as it found it.
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("%s holds %d entries after a failed get", dir, len(entries))
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit code %d", r.code)
			}
			for _, w := range want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not say %q:\n%s", w, r.stdout)
				}
			}
			if !strings.Contains(r.stderr, "MD5 verified: "+good) {
				t.Errorf("stderr does not say the MD5 was verified:\n%s", r.stderr)
			}
			// The data is usable, and a second get does nothing.
			exp := spec{Name: "got", Arch: "cnn", Batch: 16, Data: `dataset = "cifar10"` + "\ndir = \"" + dir + `"`,
				Methods: []method{{Name: "SGD", Plugin: "sgd"}}}.write(t, t.TempDir())
			if c := host(t, "check", "--plugins", pluginDir, exp); c.code != 0 || !strings.Contains(c.stdout, "cifar10 — 40 train / 16 test samples") {
				t.Errorf("check of the downloaded data: exit code %d:\n%s", c.code, c.stdout)
			}
			again := host(t, "data", "get", "cifar10", "--dir", dir, "--url", srv.URL+"/nothing")
			if again.code != 0 || !strings.Contains(again.stderr, "already present") {
				t.Errorf("second get: exit code %d:\n%s", again.code, again.stderr)
			}
		})
	}
}

// TestDataGetFashionMNISTDebian gets Fashion-MNIST from a folder laid out
// like Debian's dataset-fashion-mnist (the shared canonical files): the
// four files are copied and verified, and they are the canonical split.
func TestDataGetFashionMNISTDebian(t *testing.T) {
	deb, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data", "fashion-mnist"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(deb, "t10k-labels-idx1-ubyte.gz")); err != nil {
		t.Skip("no shared Fashion-MNIST")
	}
	dir := filepath.Join(t.TempDir(), "fm")
	r := host(t, "data", "get", "fashion-mnist", "--dir", dir, "--debian-dir", deb, "--no-apt")
	if r.code != 0 {
		t.Fatalf("exit code %d", r.code)
	}
	for _, want := range []string{
		"Fashion-MNIST: using Debian's package dataset-fashion-mnist (" + deb + ")",
		"copied " + filepath.Join(deb, "t10k-labels-idx1-ubyte.gz") + ": MD5 verified: 0d30e22e447f3c33dab9ed536400ac01",
		"Fashion-MNIST: ready in " + dir,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if want := "fashion-mnist is in " + dir; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout does not say %q:\n%s", want, r.stdout)
	}
	sp, err := data.LoadMNIST(data.FashionMNIST, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sp.Test.Y[:10], []int32{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}; !slices.Equal(got, want) {
		t.Errorf("first test labels %v, want %v", got, want)
	}
}
