package data

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/optlab/optlab/host/internal/regfile"
)

// DefaultBaseURL is where the CIFAR archives are published; the archive's
// file name is appended to it.
const DefaultBaseURL = "https://www.cs.toronto.edu/~kriz/"

// maxExtractBytes bounds the total size Get extracts from one archive, as a
// guard against a corrupt or hostile archive filling the disk. The real
// archives hold about 180 MB.
const maxExtractBytes = 2 << 30

// DefaultMaxDownload bounds the size of one downloaded file (see
// GetOptions.MaxBytes): the largest published file, CIFAR-100's archive,
// is 169 MB, so a server sending more is sending something else.
const DefaultMaxDownload = 1 << 30

// Default download timeouts (see GetOptions).
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
)

// GetOptions configures Get. The zero value downloads from DefaultBaseURL
// with the default timeouts, verifies the published MD5 and prints nothing;
// for Fashion-MNIST it copies Debian's package's files instead when they are
// installed, installing the package with apt-get first when running as root
// (see getMNIST).
type GetOptions struct {
	// BaseURL replaces DefaultBaseURL; the archive's name is appended.
	BaseURL string
	// MD5 replaces the published MD5 (hex) the archive must have.
	MD5 string
	// FileMD5 replaces, per file name, the published MD5s of datasets
	// published as several files (MNIST and Fashion-MNIST).
	FileMD5 map[string]string
	// SkipVerify disables the MD5 check entirely.
	SkipVerify bool
	// Client performs the download; nil means a client like
	// http.DefaultClient (proxy settings from the environment included)
	// whose connections time out after ConnectTimeout.
	Client *http.Client
	// ConnectTimeout bounds establishing a connection (TCP and TLS
	// handshakes) when Client is nil; zero means DefaultConnectTimeout,
	// a negative value no limit.
	ConnectTimeout time.Duration
	// IdleTimeout fails a download when no data arrives for that long,
	// whether the server is silent before its response or stalls in the
	// middle of the body; zero means DefaultIdleTimeout, a negative value
	// no limit. It applies to any Client.
	IdleTimeout time.Duration
	// MaxBytes fails a download larger than this many bytes (announced or
	// received) before it fills the disk; zero means DefaultMaxDownload, a
	// negative value no limit.
	MaxBytes int64
	// Progress receives human-readable progress lines; nil means none.
	Progress io.Writer
	// KeepArchive keeps the downloaded archive in dir after extraction.
	KeepArchive bool
	// DebianDir replaces the folder where Debian's package of the dataset
	// installs its files (Fashion-MNIST: DebianFashionMNISTDir), which Get
	// copies from when it holds them (see getMNIST).
	DebianDir string
	// NoApt keeps Get from installing the dataset's Debian package with
	// apt-get when it is missing and Get runs as root.
	NoApt bool
	// AptInstall replaces running apt-get to install a Debian package
	// (tests); when set it is used whether or not Get runs as root.
	AptInstall func(ctx context.Context, pkg string) error
}

// Get makes the named dataset available under dir and returns the folder
// holding its files. For CIFAR10 and CIFAR100 that is dir/cifar-10-batches-bin
// or dir/cifar-100-binary, which LoadCIFAR accepts as well as dir itself; for
// FashionMNIST and MNIST it is dir itself (see getMNIST).
//
// It is idempotent: when that folder (or dir itself) already holds every
// batch file with the published number of records (or the number listed
// in the marker of generated data, see WriteCIFAR), Get does nothing and
// returns it. Otherwise, if dir holds the
// archive (cifar-10-binary.tar.gz or cifar-100-binary.tar.gz, e.g. copied
// there by hand on a machine without internet access), Get extracts it;
// failing that it downloads the archive from BaseURL. The archive's MD5 is
// verified before anything is extracted, entries that would land outside
// the destination (absolute paths, "..", links) are rejected, and the
// extraction goes to a temporary folder that is moved into place only when
// complete, so a failure never leaves a half-extracted dataset behind.
func Get(ctx context.Context, name, dir string, opts GetOptions) (string, error) {
	if IsMNISTFormat(name) {
		return getMNIST(ctx, name, dir, opts)
	}
	f, err := cifarFormatFor(name)
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	if f.complete(dir) == nil { // dir is the data folder itself
		opts.printf("%s: already present in %s\n", f.title, dir)
		return dir, nil
	}
	dest := filepath.Join(dir, f.subdir)
	incomplete := f.complete(dest)
	if incomplete == nil {
		opts.printf("%s: already present in %s\n", f.title, dest)
		return dest, nil
	}
	if _, err := os.Stat(dest); err == nil {
		return "", fmt.Errorf("get %s: %s exists but is incomplete (%v); remove it and run again", name, dest, incomplete)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("get %s: %w", name, err)
	}
	want := md5Only(f.md5)
	if opts.MD5 != "" {
		want = md5Only(strings.ToLower(opts.MD5))
	}
	if opts.SkipVerify {
		want = expected{}
	}

	archive := filepath.Join(dir, f.archive)
	downloaded := false
	if _, err := os.Stat(archive); err == nil {
		opts.printf("%s: using the archive %s\n", f.title, archive)
		if _, err := verifyFile(archive, want); err != nil {
			return "", fmt.Errorf("get %s: %w; delete it to download it again", name, err)
		}
	} else {
		base := opts.BaseURL
		if base == "" {
			base = DefaultBaseURL
		}
		url := strings.TrimSuffix(base, "/") + "/" + f.archive
		if err := download(ctx, url, archive, want, opts); err != nil {
			return "", fmt.Errorf("get %s: %w", name, err)
		}
		downloaded = true
	}

	opts.printf("%s: extracting into %s\n", f.title, dest)
	err = extractInto(ctx, archive, dir, f.subdir, func(tmp string) error { return f.complete(tmp) })
	if downloaded && !opts.KeepArchive {
		// A downloaded archive is removed whether or not extraction
		// succeeded, so that a failed Get leaves dir as it found it.
		if rerr := os.Remove(archive); err == nil && rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		return "", fmt.Errorf("get %s: %w", name, err)
	}
	opts.printf("%s: ready in %s\n", f.title, dest)
	return dest, nil
}

func (o *GetOptions) printf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format, args...)
	}
}

// complete checks that dir holds every batch file with the published
// record count, or, for generated data (archives of test data included),
// with the count its marker lists (see WriteCIFAR).
func (f *cifarFormat) complete(dir string) error {
	_, err := f.checkFiles(dir, f.files())
	return err
}

// expected is what a fetched file must be: its MD5 (hex) one of md5s, or,
// failing those, its content (decompressed when it is gzip-compressed) of
// SHA-256 content. The zero value accepts anything.
type expected struct {
	md5s    []string
	content string
}

// md5Only expects the MD5 want (hex); an empty want accepts anything.
func md5Only(want string) expected {
	if want == "" {
		return expected{}
	}
	return expected{md5s: []string{want}}
}

// check verifies the file at path, whose MD5 is got (hex); what names it
// in errors. It returns what it verified, for the progress output ("" when
// nothing was to be verified).
func (e expected) check(what, path, got string) (string, error) {
	if len(e.md5s) == 0 && e.content == "" {
		return "", nil
	}
	if slices.Contains(e.md5s, got) {
		return "MD5 verified: " + got, nil
	}
	if e.content != "" {
		sum, err := contentSHA256(path)
		if err != nil {
			return "", fmt.Errorf("%s: MD5 %s matches none of %s, and %w", what, got, strings.Join(e.md5s, ", "), err)
		}
		if sum == e.content {
			return "content verified: SHA-256 of the decompressed data " + sum, nil
		}
		return "", fmt.Errorf("%s: MD5 %s does not match the expected %s, nor does the SHA-256 %s of its data match the expected %s (corrupt or incomplete file)",
			what, got, strings.Join(e.md5s, " or "), sum, e.content)
	}
	return "", fmt.Errorf("%s: MD5 %s does not match the expected %s (corrupt or incomplete download)", what, got, strings.Join(e.md5s, " or "))
}

// verifyFile checks the file at path against want and returns what it
// verified (see expected.check).
func verifyFile(path string, want expected) (string, error) {
	if len(want.md5s) == 0 && want.content == "" {
		return "", nil
	}
	sum, err := fileMD5(path)
	if err != nil {
		return "", err
	}
	return want.check(path, path, sum)
}

// fileMD5 returns the MD5 (hex) of the regular file at path.
func fileMD5(path string) (string, error) {
	file, err := regfile.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = file.Close() }()
	h := md5.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// contentSHA256 returns the SHA-256 (hex) of the file at path, of its
// decompressed data when it is gzip-compressed.
func contentSHA256(path string) (string, error) {
	file, err := regfile.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = file.Close() }()
	br := bufio.NewReader(file)
	r := io.Reader(br)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return "", fmt.Errorf("%s: corrupt gzip data: %w", path, err)
		}
		defer func() { _ = zr.Close() }()
		r = zr
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(r, maxIDXBytes+1)); err != nil {
		return "", fmt.Errorf("%s: corrupt or truncated data: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// timeoutOr returns d, or def when d is zero, or 0 (no limit) when d is
// negative.
func timeoutOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// newClient returns an HTTP client configured like http.DefaultClient whose
// TCP and TLS handshakes each time out after connect (0: never).
func newClient(connect time.Duration) *http.Client {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	return &http.Client{Transport: t}
}

// idleError is the cause of a download cancelled for receiving nothing for
// idle.
type idleError struct{ idle time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("no data received for %v: the server stopped answering", e.idle)
}

// watchdog cancels a download through cancel when it is not fed for idle.
type watchdog struct {
	idle  time.Duration
	timer *time.Timer // nil when idle is 0 (no limit)
}

func newWatchdog(idle time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{idle: idle}
	if idle > 0 {
		w.timer = time.AfterFunc(idle, func() { cancel(&idleError{idle}) })
	}
	return w
}

// feed restarts the idle period.
func (w *watchdog) feed() {
	if w.timer != nil {
		w.timer.Reset(w.idle)
	}
}

func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// watchedReader feeds its watchdog whenever data arrives.
type watchedReader struct {
	r  io.Reader
	wd *watchdog
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.wd.feed()
	}
	return n, err
}

// downloadError explains err, which ended a download running under ctx:
// the idle watchdog's cause when it fired, a connection timeout when the
// client is ours (connect > 0), err itself otherwise.
func downloadError(ctx context.Context, err error, ours bool, connect time.Duration) error {
	var idle *idleError
	if errors.As(context.Cause(ctx), &idle) {
		return idle
	}
	var ne net.Error
	if ctx.Err() == nil && ours && connect > 0 && errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no connection within %v: %w", connect, err)
	}
	return err
}

// download fetches url into the file dst, verifying it against want (its
// MD5 computed while writing). The data goes to a temporary file renamed to dst only when
// complete and verified. The download fails when connecting takes longer
// than opts.ConnectTimeout or no data arrives for opts.IdleTimeout.
func download(ctx context.Context, url, dst string, want expected, opts GetOptions) (err error) {
	connect := timeoutOr(opts.ConnectTimeout, DefaultConnectTimeout)
	client, ours := opts.Client, opts.Client == nil
	if ours {
		client = newClient(connect)
		defer client.CloseIdleConnections()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wd := newWatchdog(timeoutOr(opts.IdleTimeout, DefaultIdleTimeout), cancel)
	defer wd.stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	opts.printf("downloading %s\n", url)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, downloadError(ctx, err, ours, connect))
	}
	wd.feed()
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: %s", url, resp.Status)
	}
	limit := opts.MaxBytes
	if limit == 0 {
		limit = DefaultMaxDownload
	}
	if limit > 0 && resp.ContentLength > limit {
		return fmt.Errorf("download %s: the server announces %d bytes, more than the %d a dataset file may have (GetOptions.MaxBytes); is the URL right?", url, resp.ContentLength, limit)
	}
	body := io.Reader(&watchedReader{r: resp.Body, wd: wd})
	if limit > 0 {
		body = io.LimitReader(body, limit+1)
	}

	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".part-*")
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := md5.New()
	pw := &progressWriter{out: opts.Progress, total: resp.ContentLength, start: time.Now()}
	n, err := io.Copy(io.MultiWriter(tmp, h, pw), body)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, downloadError(ctx, err, ours, connect))
	}
	if limit > 0 && n > limit {
		return fmt.Errorf("download %s: more than the %d bytes a dataset file may have (GetOptions.MaxBytes); stopped. Is the URL right?", url, limit)
	}
	pw.finish()
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	verified, err := want.check(url, tmp.Name(), hex.EncodeToString(h.Sum(nil)))
	if err != nil {
		return err
	}
	if verified != "" {
		opts.printf("%s\n", verified)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	return nil
}

// progressWriter prints download progress every 10% (or every 16 MiB when
// the size is unknown).
type progressWriter struct {
	out   io.Writer
	total int64
	done  int64
	next  int64
	start time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.out == nil {
		return len(b), nil
	}
	if p.next == 0 {
		p.next = p.step()
	}
	for p.done >= p.next {
		p.report()
		p.next += p.step()
	}
	return len(b), nil
}

func (p *progressWriter) step() int64 {
	if p.total > 0 {
		return max(p.total/10, 1)
	}
	return 16 << 20
}

func (p *progressWriter) report() {
	mb := float64(p.done) / (1 << 20)
	if p.total > 0 {
		fmt.Fprintf(p.out, "  %5.1f / %.1f MiB (%3.0f%%)\n", mb, float64(p.total)/(1<<20), 100*float64(p.done)/float64(p.total))
		return
	}
	fmt.Fprintf(p.out, "  %5.1f MiB\n", mb)
}

func (p *progressWriter) finish() {
	if p.out == nil {
		return
	}
	secs := time.Since(p.start).Seconds()
	fmt.Fprintf(p.out, "  downloaded %.1f MiB in %.1fs\n", float64(p.done)/(1<<20), secs)
}

// extractInto extracts the tar.gz archive into a temporary folder inside
// dir, checks with valid that the folder sub it must contain is complete,
// and then moves sub into dir. On failure nothing is left in dir.
func extractInto(ctx context.Context, archive, dir, sub string, valid func(string) error) error {
	tmp, err := os.MkdirTemp(dir, "."+sub+".extract-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := extractTarGz(ctx, archive, tmp); err != nil {
		return err
	}
	got := filepath.Join(tmp, sub)
	if err := valid(got); err != nil {
		return fmt.Errorf("archive %s does not hold the expected %s folder: %w", archive, sub, err)
	}
	if err := os.Rename(got, filepath.Join(dir, sub)); err != nil {
		return err
	}
	return nil
}

// extractTarGz extracts the regular files and folders of a tar.gz archive
// into dst, rejecting any entry that is not local to dst (absolute, "..",
// through a link) and any link or special file.
func extractTarGz(ctx context.Context, archive, dst string) error {
	file, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	zr, err := gzip.NewReader(file)
	if err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	defer func() { _ = zr.Close() }()
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()

	tr := tar.NewReader(zr)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive %s: %w", archive, err)
		}
		name := path.Clean(hdr.Name)
		if !filepath.IsLocal(name) || strings.Contains(hdr.Name, `\`) {
			return fmt.Errorf("archive %s: entry %q points outside the destination", archive, hdr.Name)
		}
		local := filepath.FromSlash(name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(local, 0o755); err != nil {
				return fmt.Errorf("archive %s: %w", archive, err)
			}
		case tar.TypeReg:
			total += hdr.Size
			if hdr.Size < 0 || total > maxExtractBytes {
				return fmt.Errorf("archive %s: more than %d bytes of content", archive, int64(maxExtractBytes))
			}
			if err := writeEntry(root, local, tr, hdr.Size); err != nil {
				return fmt.Errorf("archive %s: entry %q: %w", archive, hdr.Name, err)
			}
		case tar.TypeXGlobalHeader:
			// Metadata only.
		default:
			return fmt.Errorf("archive %s: entry %q has unsupported type %q (only files and folders are extracted)", archive, hdr.Name, hdr.Typeflag)
		}
	}
}

func writeEntry(root *os.Root, name string, r io.Reader, size int64) (err error) {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("duplicate entry")
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	n, err := io.Copy(out, io.LimitReader(r, size))
	if err != nil {
		return err
	}
	if n != size {
		return io.ErrUnexpectedEOF
	}
	return nil
}
