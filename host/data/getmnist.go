package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/optlab/optlab/host/internal/regfile"
)

// getMNIST makes an MNIST-format dataset available in dir: the four
// gzip files, each verified before it is renamed into place. They come from
// Debian's package when the dataset has one (Fashion-MNIST:
// dataset-fashion-mnist) and it is installed (or installing it with apt
// succeeds, see debianSource), else each is downloaded from BaseURL
// (default: the dataset's canonical address). A file is verified by its
// published MD5, Debian's MD5 or the SHA-256 of its decompressed data, so a
// mirror compressing the canonical data otherwise is accepted too.
// Files already present are kept; when all four are present and readable
// Get does nothing. opts.FileMD5 replaces the checks of a file by the one
// MD5 it gives; opts.MD5 does not apply (there are four files).
func getMNIST(ctx context.Context, name, dir string, opts GetOptions) (string, error) {
	f, err := mnistFormatFor(name)
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	if _, err := LoadMNIST(name, dir); err == nil {
		opts.printf("%s: already present in %s\n", f.title, dir)
		return dir, nil
	} else if !errors.Is(err, ErrMissing) {
		return "", fmt.Errorf("get %s: %w; remove the bad file and run again", name, err)
	}
	var missing []int
	for i := range f.files {
		if _, err := f.find(dir, i); err != nil {
			missing = append(missing, i)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("get %s: %w", name, err)
	}
	if src := f.debianSource(ctx, opts); src != "" {
		if err := f.copyVerified(src, dir, missing, opts); err != nil {
			return "", fmt.Errorf("get %s: %w", name, err)
		}
	} else {
		base := opts.BaseURL
		if base == "" {
			base = f.baseURL
		}
		for _, i := range missing {
			url := strings.TrimSuffix(base, "/") + "/" + f.files[i].name
			if err := download(ctx, url, filepath.Join(dir, f.files[i].name), f.expected(i, opts), opts); err != nil {
				return "", fmt.Errorf("get %s: %w", name, err)
			}
		}
	}
	if _, err := LoadMNIST(name, dir); err != nil {
		return "", fmt.Errorf("get %s: %w", name, err)
	}
	opts.printf("%s: ready in %s\n", f.title, dir)
	return dir, nil
}

// expected returns what file i must be (see getMNIST).
func (f *mnistFormat) expected(i int, opts GetOptions) expected {
	file := f.files[i]
	switch m, ok := opts.FileMD5[file.name]; {
	case opts.SkipVerify:
		return expected{}
	case ok:
		return md5Only(strings.ToLower(m))
	}
	e := expected{md5s: []string{file.md5}, content: file.sha256}
	if file.debianMD5 != "" {
		e.md5s = append(e.md5s, file.debianMD5)
	}
	return e
}

// debianSource returns the folder of Debian's package of f (opts.DebianDir,
// default f.debianDir) when it holds the four files, or "" when they are
// to be downloaded: the dataset has no package, opts.BaseURL asks for a
// download, or the package is not installed. When it is not, running as
// root with apt-get at hand (or opts.AptInstall set) and opts.NoApt unset,
// debianSource installs it first; a failed install is reported in one
// line and leads to the download.
func (f *mnistFormat) debianSource(ctx context.Context, opts GetOptions) string {
	if f.debianPackage == "" || opts.BaseURL != "" {
		return ""
	}
	src := opts.DebianDir
	if src == "" {
		src = f.debianDir
	}
	if f.holdsAll(src) {
		opts.printf("%s: using Debian's package %s (%s)\n", f.title, f.debianPackage, src)
		return src
	}
	install := opts.AptInstall
	_, aptErr := exec.LookPath("apt-get")
	if install == nil && os.Geteuid() == 0 && aptErr == nil {
		install = aptGetInstall
	}
	switch {
	case opts.NoApt:
		return ""
	case install == nil:
		if aptErr == nil {
			opts.printf("%s: Debian's package %s is not installed (`sudo apt-get install %s` gives the same files); downloading\n",
				f.title, f.debianPackage, f.debianPackage)
		}
		return ""
	}
	opts.printf("%s: installing Debian's package %s with apt-get …\n", f.title, f.debianPackage)
	if err := install(ctx, f.debianPackage); err != nil {
		opts.printf("%s: could not install %s (%v); downloading instead\n", f.title, f.debianPackage, err)
		return ""
	}
	if !f.holdsAll(src) {
		opts.printf("%s: installed %s, but %s does not hold the four files; downloading instead\n", f.title, f.debianPackage, src)
		return ""
	}
	opts.printf("%s: using Debian's package %s (%s)\n", f.title, f.debianPackage, src)
	return src
}

// holdsAll reports whether dir holds the four files of f.
func (f *mnistFormat) holdsAll(dir string) bool {
	for i := range f.files {
		if _, err := f.find(dir, i); err != nil {
			return false
		}
	}
	return true
}

// copyVerified copies files idx of f from src into dir under their
// canonical names, verifying each (see expected). The copies go to
// temporary files renamed into place only when all are verified, so a
// failure leaves dir as it was.
func (f *mnistFormat) copyVerified(src, dir string, idx []int, opts GetOptions) (err error) {
	var tmps []string
	defer func() {
		if err != nil {
			for _, t := range tmps {
				_ = os.Remove(t)
			}
		}
	}()
	for _, i := range idx {
		from, err := f.find(src, i)
		if err != nil {
			return err
		}
		tmp, err := copyToTemp(from, dir, "."+f.files[i].name+".part-*")
		if tmp != "" {
			tmps = append(tmps, tmp)
		}
		if err != nil {
			return err
		}
		verified, err := verifyFile(tmp, f.expected(i, opts))
		if err != nil {
			return fmt.Errorf("%s: %w (reinstall it: `apt-get install --reinstall %s`)",
				from, err, f.debianPackage)
		}
		opts.printf("copied %s: %s\n", from, verified)
	}
	for k, i := range idx {
		name := f.files[i].name
		if from, _ := f.find(src, i); !strings.HasSuffix(from, ".gz") {
			name = strings.TrimSuffix(name, ".gz") // an uncompressed copy keeps its name
		}
		if err := os.Rename(tmps[k], filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// copyToTemp copies the regular file from into a new temporary file in dir
// named after pattern and returns its path ("" when none was created).
func copyToTemp(from, dir, pattern string) (_ string, err error) {
	in, err := regfile.Open(from)
	if err != nil {
		return "", err
	}
	defer func() { _ = in.Close() }()
	out, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return out.Name(), fmt.Errorf("copying %s: %w", from, err)
	}
	return out.Name(), out.Close()
}

// aptGetInstall installs Debian's package pkg with apt-get, without
// questions or recommended packages, updating the package lists first
// only when the install fails without it (a fresh machine has none). Its
// error gives the last line each failed apt-get printed.
func aptGetInstall(ctx context.Context, pkg string) error {
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(lines[len(lines)-1]))
		}
		return nil
	}
	install := []string{"install", "-y", "-q", "--no-install-recommends", pkg}
	err := run(install...)
	if err == nil {
		return nil
	}
	if uerr := run("update", "-q"); uerr != nil {
		return fmt.Errorf("%w; %w", err, uerr)
	}
	return run(install...)
}
