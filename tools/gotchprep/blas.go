package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// blasPackage is the optimized BLAS installed behind Debian's libtorch:
// OpenBLAS built with OpenMP, which shares libgomp's thread pool with
// libtorch (the fastest of the Debian BLAS packages on mlp, cnn and
// resnet18; docs/BENCHMARKS.md, "BLAS").
const blasPackage = "libopenblas0-openmp"

// blasAlternative is the path Debian's libtorch loads its BLAS through; it
// is an update-alternatives link to one implementation's folder.
func blasAlternative() string { return filepath.Join(debianLib, "libblas.so.3") }

// isReferenceBLAS tells from the real path of libblas.so.3 whether it is
// netlib's reference BLAS (Debian's libblas3, folder blas/). A missing link
// counts as reference: libtorch-dev depends on libblas3, so the package
// manager would provide exactly that.
func isReferenceBLAS(link string) (bool, string) {
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		return true, ""
	}
	return filepath.Base(filepath.Dir(real)) == "blas", real
}

// ensureBLAS makes Debian's libtorch use an optimized BLAS: when
// libblas.so.3 resolves to the reference BLAS it installs blasPackage with
// apt (when allowed and root; its alternative's priority then selects it
// automatically), and otherwise says how. Other libtorch sources bring
// their own BLAS and are left alone.
func ensureBLAS(lt Libtorch, install bool, log func(string, ...any)) error {
	if lt.Source != "debian" {
		return nil
	}
	ref, real := isReferenceBLAS(blasAlternative())
	if !ref {
		return nil
	}
	hint := fmt.Sprintf("Debian's libtorch uses the reference BLAS (%s), which makes linear layers ~10× slower: run `sudo apt-get install %s`", real, blasPackage)
	if !install || os.Geteuid() != 0 {
		log("note: %s", hint)
		return nil
	}
	log("libtorch uses the reference BLAS: installing %s with apt-get …", blasPackage)
	if err := aptInstall(blasPackage); err != nil {
		return fmt.Errorf("%s: %w", hint, err)
	}
	if ref, real := isReferenceBLAS(blasAlternative()); ref {
		return fmt.Errorf("installed %s but libblas.so.3 still resolves to %s; select it with `update-alternatives --config libblas.so.3-%s`", blasPackage, real, multiarch())
	}
	return nil
}

// aptInstall installs packages with apt-get, updating the package lists
// first only when the install fails without it (a fresh machine has none).
func aptInstall(pkgs ...string) error {
	run := func(args ...string) error {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
		return nil
	}
	install := append([]string{"install", "-y", "-q"}, pkgs...)
	if err := run(install...); err == nil {
		return nil
	}
	if err := run("update", "-q"); err != nil {
		return err
	}
	return run(install...)
}
