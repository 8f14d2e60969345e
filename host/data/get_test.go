package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type tarEntry struct {
	name     string
	body     []byte
	typeflag byte // 0 means a regular file
	link     string
}

func makeTarGz(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typeflag, Linkname: e.link}
		switch e.typeflag {
		case 0:
			hdr.Typeflag = tar.TypeReg
		case tar.TypeDir:
			hdr.Mode = 0o755
		default:
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
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

// cifarArchive builds a tar.gz laid out like the published archive of kind,
// holding small generated batches.
func cifarArchive(t *testing.T, kind string) []byte {
	t.Helper()
	return cifarArchiveWithout(t, kind, "")
}

// cifarArchiveWithout is cifarArchive without the file named skip.
func cifarArchiveWithout(t *testing.T, kind, skip string) []byte {
	t.Helper()
	f, err := cifarFormatFor(kind)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := WriteCIFAR(src, kind, 4, 3, 1); err != nil {
		t.Fatal(err)
	}
	entries := []tarEntry{{name: f.subdir + "/", typeflag: tar.TypeDir}}
	files, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range files {
		if fi.Name() == skip {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, fi.Name()))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, tarEntry{name: f.subdir + "/" + fi.Name(), body: b})
	}
	return makeTarGz(t, entries)
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// serve serves body as any archive name and counts the requests.
func serve(t *testing.T, body []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !strings.HasSuffix(r.URL.Path, ".tar.gz") {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// listAll returns every path under dir, relative to it.
func listAll(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func TestGet(t *testing.T) {
	tests := []struct {
		kind, subdir string
	}{
		{CIFAR10, "cifar-10-batches-bin"},
		{CIFAR100, "cifar-100-binary"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			archive := cifarArchive(t, tc.kind)
			srv, hits := serve(t, archive)
			dir := filepath.Join(t.TempDir(), "data")
			var progress bytes.Buffer
			opts := GetOptions{BaseURL: srv.URL, MD5: md5Hex(archive), Progress: &progress}

			got, err := Get(context.Background(), tc.kind, dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, tc.subdir); got != want {
				t.Errorf("Get = %s, want %s", got, want)
			}
			for _, w := range []string{"downloading " + srv.URL + "/", "MD5 verified", "ready in"} {
				if !strings.Contains(progress.String(), w) {
					t.Errorf("progress lacks %q:\n%s", w, progress.String())
				}
			}
			for _, d := range []string{dir, got} {
				sp, err := LoadCIFAR(tc.kind, d)
				if err != nil {
					t.Fatal(err)
				}
				if sp.Train.Len() != 20 || sp.Test.Len() != 3 {
					t.Errorf("train/test = %d/%d", sp.Train.Len(), sp.Test.Len())
				}
			}
			// Only the data folder is left: no archive, no temporary files.
			for _, p := range listAll(t, dir) {
				if !strings.HasPrefix(p, tc.subdir) {
					t.Errorf("left behind: %s", p)
				}
			}

			// Idempotent: a second call downloads nothing.
			progress.Reset()
			if _, err := Get(context.Background(), tc.kind, dir, opts); err != nil {
				t.Fatal(err)
			}
			if hits.Load() != 1 {
				t.Errorf("%d requests, want 1", hits.Load())
			}
			if !strings.Contains(progress.String(), "already present") {
				t.Errorf("progress = %q", progress.String())
			}
			// So is one naming the data folder itself.
			if again, err := Get(context.Background(), tc.kind, got, opts); err != nil || again != got {
				t.Errorf("Get(data folder) = %s, %v; want %s", again, err, got)
			}
			if hits.Load() != 1 {
				t.Errorf("%d requests, want 1", hits.Load())
			}
		})
	}
}

func TestGetKeepArchiveAndLocalArchive(t *testing.T) {
	archive := cifarArchive(t, CIFAR10)
	srv, hits := serve(t, archive)
	dir := t.TempDir()
	opts := GetOptions{BaseURL: srv.URL, MD5: md5Hex(archive), KeepArchive: true}
	if _, err := Get(context.Background(), CIFAR10, dir, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cifar-10-binary.tar.gz")); err != nil {
		t.Fatalf("archive not kept: %v", err)
	}
	// With the data folder gone, the kept archive is extracted again
	// without a download, and it is left in place.
	if err := os.RemoveAll(filepath.Join(dir, "cifar-10-batches-bin")); err != nil {
		t.Fatal(err)
	}
	opts.KeepArchive = false
	opts.BaseURL = "http://127.0.0.1:1" // unreachable
	if _, err := Get(context.Background(), CIFAR10, dir, opts); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 {
		t.Errorf("%d requests, want 1", hits.Load())
	}
	if _, err := os.Stat(filepath.Join(dir, "cifar-10-binary.tar.gz")); err != nil {
		t.Errorf("a local archive was removed: %v", err)
	}
	if _, err := LoadCIFAR(CIFAR10, dir); err != nil {
		t.Fatal(err)
	}
}

func TestGetSkipVerify(t *testing.T) {
	archive := cifarArchive(t, CIFAR100)
	srv, _ := serve(t, archive)
	if _, err := Get(context.Background(), CIFAR100, t.TempDir(), GetOptions{BaseURL: srv.URL, SkipVerify: true}); err != nil {
		t.Fatal(err)
	}
}

// TestGetFailures checks that every failure leaves dir as it was.
func TestGetFailures(t *testing.T) {
	good := cifarArchive(t, CIFAR10)
	batch := make([]byte, 3073)
	tests := []struct {
		name    string
		archive []byte
		md5     string // "" means the archive's own MD5
		status  bool   // serve 404
		want    string
	}{
		{name: "wrong md5", archive: good, md5: strings.Repeat("0", 32), want: "does not match"},
		{name: "published md5", archive: good, md5: "published", want: "c32a1d4ab5d03f1284b67883e8d87530"},
		{name: "not found", status: true, want: "404"},
		{name: "not gzip", archive: []byte("hello"), want: "gzip"},
		{name: "dotdot", archive: makeTarGz(t, []tarEntry{{name: "cifar-10-batches-bin/../../evil.bin", body: batch}}), want: "outside"},
		{name: "absolute", archive: makeTarGz(t, []tarEntry{{name: "/tmp/evil.bin", body: batch}}), want: "outside"},
		{name: "symlink", archive: makeTarGz(t, []tarEntry{{name: "cifar-10-batches-bin", typeflag: tar.TypeSymlink, link: "/etc"}}), want: "unsupported type"},
		{name: "hardlink", archive: makeTarGz(t, []tarEntry{{name: "cifar-10-batches-bin/x", typeflag: tar.TypeLink, link: "/etc/passwd"}}), want: "unsupported type"},
		{name: "incomplete", archive: makeTarGz(t, []tarEntry{{name: "cifar-10-batches-bin/test_batch.bin", body: batch}}), want: "does not hold"},
		{name: "wrong folder", archive: makeTarGz(t, []tarEntry{{name: "other/test_batch.bin", body: batch}}), want: "does not hold"},
		{name: "generated without marker", archive: cifarArchiveWithout(t, CIFAR10, "optlab-generated.txt"), want: "data_batch_1.bin has 4 records, the published file has 10000: truncated?"},
		{name: "duplicate", archive: makeTarGz(t, []tarEntry{{name: "a", body: batch}, {name: "./a", body: batch}}), want: "duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status {
					http.NotFound(w, r)
					return
				}
				w.Write(tc.archive)
			}))
			defer srv.Close()
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			opts := GetOptions{BaseURL: srv.URL + "/", MD5: tc.md5}
			switch tc.md5 {
			case "":
				opts.MD5 = md5Hex(tc.archive)
			case "published":
				opts.MD5 = ""
			}
			_, err := Get(context.Background(), CIFAR10, dir, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get = %v, want an error containing %q", err, tc.want)
			}
			if left := listAll(t, parent); !slices.Equal(left, []string{"data"}) {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestGetRefusals(t *testing.T) {
	archive := cifarArchive(t, CIFAR10)
	srv, hits := serve(t, archive)
	opts := GetOptions{BaseURL: srv.URL, MD5: md5Hex(archive)}

	if _, err := Get(context.Background(), "imagenet", t.TempDir(), opts); err == nil {
		t.Errorf("unknown dataset: no error")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Get(ctx, CIFAR10, t.TempDir(), opts); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("cancelled context: %v", err)
	}

	// An incomplete data folder is not overwritten.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "cifar-10-batches-bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Get(context.Background(), CIFAR10, dir, opts); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("incomplete folder: %v", err)
	}

	// A corrupt local archive is reported, not silently replaced.
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cifar-10-binary.tar.gz"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Get(context.Background(), CIFAR10, dir, opts); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("corrupt local archive: %v", err)
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests, want 0", hits.Load())
	}
}

// silentListener accepts connections and never sends a byte on them, like a
// server that hangs; the connections are closed when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// stallingServer sends the first half of body and then nothing until the
// client gives up or the test ends. With trickle it instead sends body in
// ten pieces, trickle apart.
func stallingServer(t *testing.T, body []byte, trickle time.Duration) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if trickle > 0 {
			step := (len(body) + 9) / 10
			for i := 0; i < len(body); i += step {
				w.Write(body[i:min(i+step, len(body))])
				w.(http.Flusher).Flush()
				time.Sleep(trickle)
			}
			return
		}
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// TestGetTimeouts checks that a server that never answers, or stops in the
// middle, fails the download after the timeouts instead of hanging.
func TestGetTimeouts(t *testing.T) {
	archive := cifarArchive(t, CIFAR10)
	const short = 200 * time.Millisecond
	tests := []struct {
		name    string
		url     func(t *testing.T) string
		opts    GetOptions
		want    string // "" means success
		atLeast time.Duration
	}{
		{
			name: "never answers",
			url:  func(t *testing.T) string { return "http://" + silentListener(t) },
			opts: GetOptions{IdleTimeout: short},
			want: "no data received for 200ms: the server stopped answering",
		},
		{
			name: "never answers, own client",
			url:  func(t *testing.T) string { return "http://" + silentListener(t) },
			opts: GetOptions{IdleTimeout: short, Client: &http.Client{}},
			want: "no data received for 200ms",
		},
		{
			name: "stalls mid-body",
			url:  func(t *testing.T) string { return stallingServer(t, archive, 0) },
			opts: GetOptions{IdleTimeout: short},
			want: "no data received for 200ms: the server stopped answering",
		},
		{
			name: "TLS handshake never answered",
			url:  func(t *testing.T) string { return "https://" + silentListener(t) },
			opts: GetOptions{ConnectTimeout: short, IdleTimeout: time.Minute},
			want: "no connection within 200ms",
		},
		{
			name:    "slow but steady",
			url:     func(t *testing.T) string { return stallingServer(t, archive, 50*time.Millisecond) },
			opts:    GetOptions{IdleTimeout: short},
			atLeast: 400 * time.Millisecond, // longer than the idle timeout
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The guard keeps a regression from hanging the test.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			opts := tc.opts
			opts.BaseURL, opts.MD5 = tc.url(t), md5Hex(archive)
			start := time.Now()
			_, err := Get(ctx, CIFAR10, dir, opts)
			took := time.Since(start)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if took < tc.atLeast {
					t.Errorf("took %v, want at least %v", took, tc.atLeast)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get = %v, want an error containing %q", err, tc.want)
			}
			if took > 10*time.Second {
				t.Errorf("took %v", took)
			}
			if left := listAll(t, parent); !slices.Equal(left, []string{"data"}) {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestGetCancelWhileStalled checks that cancelling (Ctrl-C) a stalled
// download reports the cancellation, not a timeout.
func TestGetCancelWhileStalled(t *testing.T) {
	archive := cifarArchive(t, CIFAR10)
	url := stallingServer(t, archive, 0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := Get(ctx, CIFAR10, t.TempDir(), GetOptions{BaseURL: url, MD5: md5Hex(archive), IdleTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "canceled") || strings.Contains(err.Error(), "no data") {
		t.Errorf("Get = %v, want a cancellation", err)
	}
}

// TestGetSizeCap (hardening 26, also seen): a download larger than
// GetOptions.MaxBytes fails before it fills the disk, whether the server
// announces its size or streams without one, and leaves nothing behind.
func TestGetSizeCap(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 4096)
	for _, announce := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if announce {
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			}
			w.Write(body)
			if !announce {
				w.(http.Flusher).Flush() // chunked: no length
			}
		}))
		parent := t.TempDir()
		dir := filepath.Join(parent, "data")
		_, err := Get(context.Background(), CIFAR10, dir, GetOptions{BaseURL: srv.URL + "/", MaxBytes: 1000, SkipVerify: true})
		srv.Close()
		want := "more than the 1000 bytes a dataset file may have"
		if announce {
			want = "the server announces 4096 bytes, more than the 1000"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("announced %v: Get = %v, want an error containing %q", announce, err, want)
		}
		if left := listAll(t, dir); len(left) != 0 {
			t.Errorf("announced %v: left behind %v", announce, left)
		}
	}
}

// Every default download address is https.
func TestDefaultURLsHTTPS(t *testing.T) {
	urls := []string{DefaultBaseURL}
	for _, name := range []string{FashionMNIST, MNIST} {
		f, err := mnistFormatFor(name)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, f.baseURL)
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, "https://") {
			t.Errorf("%s is not https", u)
		}
	}
}
