package data

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// sharedFashionMNIST returns the folder of the canonical Fashion-MNIST files
// as Debian's dataset-fashion-mnist ships them (../shared), skipping the
// test when it is absent.
func sharedFashionMNIST(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data", "fashion-mnist"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz")); err != nil {
		t.Skip("no shared Fashion-MNIST")
	}
	return dir
}

// fakeDebian makes a folder laid out like Debian's package: links to the
// shared files, or copies of them changed by edit (by file name).
func fakeDebian(t *testing.T, shared string, edit map[string]func([]byte) []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fashion-mnist")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, _ := mnistFormatFor(FashionMNIST)
	for _, file := range f.files {
		src, dst := filepath.Join(shared, file.name), filepath.Join(dir, file.name)
		if e, ok := edit[file.name]; ok {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, e(b), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Symlink(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// noApt fails the test when Get tries to install a package.
func noApt(t *testing.T) func(context.Context, string) error {
	return func(context.Context, string) error {
		t.Error("Get ran apt-get")
		return errors.New("no apt in tests")
	}
}

// wantCanonical checks that dir holds the canonical Fashion-MNIST split:
// its first test and training labels are the published ones.
func wantCanonical(t *testing.T, dir string) {
	t.Helper()
	sp, err := LoadMNIST(FashionMNIST, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sp.Test.Y[:10], []int32{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}; !slices.Equal(got, want) {
		t.Errorf("first test labels %v, want %v", got, want)
	}
	if got, want := sp.Train.Y[:10], []int32{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}; !slices.Equal(got, want) {
		t.Errorf("first training labels %v, want %v", got, want)
	}
}

// TestGetFashionMNISTDebian copies Debian's files (the shared ones, as the
// package installs them), verifying each.
func TestGetFashionMNISTDebian(t *testing.T) {
	shared := sharedFashionMNIST(t)
	deb := fakeDebian(t, shared, nil)
	dir := filepath.Join(t.TempDir(), "fm")
	var log bytes.Buffer
	got, err := Get(context.Background(), FashionMNIST, dir, GetOptions{DebianDir: deb, AptInstall: noApt(t), Progress: &log})
	if err != nil {
		t.Fatal(err)
	}
	if got != dir {
		t.Fatalf("got %s, want %s", got, dir)
	}
	f, _ := mnistFormatFor(FashionMNIST)
	for _, file := range f.files {
		if sum, err := fileMD5(filepath.Join(dir, file.name)); err != nil || sum != file.debianMD5 {
			t.Errorf("%s: MD5 %s (%v), want Debian's %s", file.name, sum, err, file.debianMD5)
		}
		if !strings.Contains(log.String(), "copied "+filepath.Join(deb, file.name)+": MD5 verified: "+file.debianMD5) {
			t.Errorf("the output does not say %s was copied and verified:\n%s", file.name, log.String())
		}
	}
	if want := "Fashion-MNIST: using Debian's package dataset-fashion-mnist (" + deb + ")"; !strings.Contains(log.String(), want) {
		t.Errorf("the output does not say %q:\n%s", want, log.String())
	}
	if left := listAll(t, dir); len(left) != 4 {
		t.Errorf("%s holds %v, want the four files", dir, left)
	}
	wantCanonical(t, dir)

	// Idempotent.
	log.Reset()
	if _, err := Get(context.Background(), FashionMNIST, dir, GetOptions{DebianDir: t.TempDir(), AptInstall: noApt(t), Progress: &log}); err != nil ||
		!strings.Contains(log.String(), "already present") {
		t.Fatalf("second get: %v\n%s", err, log.String())
	}
}

// TestGetFashionMNISTVerify: a corrupt file of the package fails the get
// and leaves nothing behind; the same data compressed otherwise passes by
// the SHA-256 of its content.
func TestGetFashionMNISTVerify(t *testing.T) {
	shared := sharedFashionMNIST(t)
	flip := func(b []byte) []byte {
		data, err := gunzipBytes("labels", b)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)-1] ^= 1 // another label for the last test image
		return gz(t, data)
	}
	deb := fakeDebian(t, shared, map[string]func([]byte) []byte{"t10k-labels-idx1-ubyte.gz": flip})
	dir := t.TempDir()
	_, err := Get(context.Background(), FashionMNIST, dir, GetOptions{DebianDir: deb, AptInstall: noApt(t)})
	for _, want := range []string{
		"get fashion-mnist: " + filepath.Join(deb, "t10k-labels-idx1-ubyte.gz") + ": ",
		"does not match the expected bb300cfdad3c16e7a12a480ee83cd310 or 0d30e22e447f3c33dab9ed536400ac01, nor does the SHA-256 ",
		"match the expected 0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
		"`apt-get install --reinstall dataset-fashion-mnist`",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant %q", err, want)
		}
	}
	if left := listAll(t, dir); len(left) != 0 {
		t.Errorf("a failed get left %v", left)
	}

	recompress := func(b []byte) []byte {
		data, err := gunzipBytes("labels", b)
		if err != nil {
			t.Fatal(err)
		}
		return gz(t, data)
	}
	deb = fakeDebian(t, shared, map[string]func([]byte) []byte{"t10k-labels-idx1-ubyte.gz": recompress})
	var log bytes.Buffer
	if _, err := Get(context.Background(), FashionMNIST, dir, GetOptions{DebianDir: deb, AptInstall: noApt(t), Progress: &log}); err != nil {
		t.Fatal(err)
	}
	if want := "content verified: SHA-256 of the decompressed data 0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"; !strings.Contains(log.String(), want) {
		t.Errorf("the output does not say %q:\n%s", want, log.String())
	}
	wantCanonical(t, dir)
}

// redirectTo is a transport sending every request to srv, for the file
// its path names (the last element), and noting where it was sent.
type redirectTo struct {
	srv   *httptest.Server
	mu    sync.Mutex
	paths []string
}

func (r *redirectTo) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Host+req.URL.Path)
	r.mu.Unlock()
	u, _ := url.Parse(r.srv.URL)
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.URL.Path = u.Scheme, u.Host, "/"+path.Base(req.URL.Path)
	return http.DefaultTransport.RoundTrip(req)
}

// TestGetFashionMNISTApt: when the package is missing, Get installs it
// with apt (stubbed here) and copies its files; when the install fails, or
// apt is not to be used, or a URL is given, it downloads them instead.
func TestGetFashionMNISTApt(t *testing.T) {
	shared := sharedFashionMNIST(t)
	mirror := httptest.NewServer(http.FileServer(http.Dir(shared)))
	t.Cleanup(mirror.Close)

	t.Run("installs", func(t *testing.T) {
		deb := filepath.Join(t.TempDir(), "datasets", "fashion-mnist")
		var asked []string
		install := func(_ context.Context, pkg string) error {
			asked = append(asked, pkg)
			if err := os.MkdirAll(filepath.Dir(deb), 0o755); err != nil {
				return err
			}
			return os.Symlink(shared, deb)
		}
		dir := t.TempDir()
		var log bytes.Buffer
		if _, err := Get(context.Background(), FashionMNIST, dir, GetOptions{DebianDir: deb, AptInstall: install, Progress: &log}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(asked, []string{"dataset-fashion-mnist"}) {
			t.Errorf("installed %v, want dataset-fashion-mnist", asked)
		}
		for _, want := range []string{"installing Debian's package dataset-fashion-mnist with apt-get", "using Debian's package dataset-fashion-mnist (" + deb + ")"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("the output does not say %q:\n%s", want, log.String())
			}
		}
		wantCanonical(t, dir)
	})

	zalando := "github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/"
	for _, tt := range []struct {
		name    string
		opts    GetOptions
		want    string   // in the output
		fetched []string // host and path of each request
	}{
		{"install fails", GetOptions{AptInstall: func(context.Context, string) error { return errors.New("E: Unable to locate package") }},
			"Fashion-MNIST: could not install dataset-fashion-mnist (E: Unable to locate package); downloading instead\n", nil},
		{"no apt", GetOptions{NoApt: true, AptInstall: noApt(t)}, "MD5 verified: cf8536b0aa1a6ac5fa3f23001093305c", nil},
		{"URL given", GetOptions{BaseURL: "https://mirror.example/fm", AptInstall: noApt(t)}, "downloading https://mirror.example/fm/t10k-labels-idx1-ubyte.gz",
			[]string{"mirror.example/fm/train-images-idx3-ubyte.gz", "mirror.example/fm/train-labels-idx1-ubyte.gz",
				"mirror.example/fm/t10k-images-idx3-ubyte.gz", "mirror.example/fm/t10k-labels-idx1-ubyte.gz"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := &redirectTo{srv: mirror}
			var log bytes.Buffer
			opts := tt.opts
			opts.DebianDir, opts.Client, opts.Progress = filepath.Join(t.TempDir(), "none"), &http.Client{Transport: rt}, &log
			dir := t.TempDir()
			if _, err := Get(context.Background(), FashionMNIST, dir, opts); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), tt.want) {
				t.Errorf("the output does not say %q:\n%s", tt.want, log.String())
			}
			want := tt.fetched
			if want == nil {
				f, _ := mnistFormatFor(FashionMNIST)
				for _, file := range f.files {
					want = append(want, zalando+file.name)
				}
			}
			if !slices.Equal(rt.paths, want) {
				t.Errorf("fetched %v, want %v", rt.paths, want)
			}
			wantCanonical(t, dir)
		})
	}
}

// TestAptGetInstall runs aptGetInstall against a fake apt-get: without
// questions or recommends, updating the package lists only when the first
// install fails, and reporting apt-get's last line when all fails.
func TestAptGetInstall(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "log")
	// The install fails until the lists are updated; FAIL_UPDATE fails the update too.
	script := `#!/bin/sh
echo "$DEBIAN_FRONTEND apt-get $*" >> ` + log + `
case "$1" in
update) [ -z "$FAIL_UPDATE" ] && touch ` + bin + `/updated && exit 0; echo "E: no network"; exit 100;;
install) [ -e ` + bin + `/updated ] && exit 0; echo "Reading package lists..."; echo "E: Unable to locate package $5" >&2; exit 100;;
esac
exit 1
`
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	t.Setenv("FAIL_UPDATE", "1")
	err := aptGetInstall(context.Background(), "dataset-fashion-mnist")
	want := "apt-get install -y -q --no-install-recommends dataset-fashion-mnist: exit status 100: E: Unable to locate package dataset-fashion-mnist; apt-get update -q: exit status 100: E: no network"
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
	t.Setenv("FAIL_UPDATE", "")
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := aptGetInstall(context.Background(), "dataset-fashion-mnist"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	install := "noninteractive apt-get install -y -q --no-install-recommends dataset-fashion-mnist\n"
	if got, want := string(b), install+"noninteractive apt-get update -q\n"+install; got != want {
		t.Errorf("ran\n%swant\n%s", got, want)
	}
}
