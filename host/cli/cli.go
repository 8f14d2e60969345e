// Package cli implements the host command: run and check experiments,
// print result tables, fetch datasets and list plugins.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/optlab/optlab/host/plugin"
	"github.com/optlab/optlab/host/tensor"
)

const usage = `usage: host <command> [arguments]

commands:
  run EXPERIMENT.toml      train the experiment's grid and print its table
      [--smoke] [--shard i/n] [--plugins DIR] [--results DIR] [--device D] [-q]
      [--step-timeout 10m]   a plugin whose step takes longer counts as hung: its run fails
      [--timeouts start=1m,configure=5m,…]  the other deadlines of plugin calls (also for check)
      [--lock-timeout 10m]   give up waiting for a results lock another process holds (waits are reported after 2 s)
      [--set KEY=VALUE]      override a key of the file: train.epochs=3, method.SAM.params.rho=[0.02,0.05]
  check EXPERIMENT.toml    validate data, models, plugins and hyperparameters; print the grid
      [--plugins DIR] [--set KEY=VALUE] [--timeouts …]
  table FILE.jsonl…        print result tables [--by dataset,arch] [--metrics …] [--format markdown|csv|latex] [--time]
      [--baseline METHOD]    Δ to METHOD with a 95 % Welch t interval over seeds
      [--select val_acc]     per method, the sweep's setting that is best on validation data
      [--corruptions]        corrupted ACC, retained, mCE (with --baseline), family × severity
  landscape --checkpoint A.safetensors [--checkpoint B …] --experiment E.toml
      [--steps 21] [--radius 1] [--2d] [--samples 2048] [--out DIR]
                           loss along filter-normalized random directions, sharpness
  plot results/<experiment> [--metric test_acc,train_loss] [--out FILE.png]
                           training curves per method (mean ± std over seeds)
  plot RUNS --corruptions  test accuracy against corruption severity
  data get NAME --dir D    download and verify cifar10, cifar100, fashion-mnist or mnist [--url BASE] [--md5 HEX]
      [--no-apt] [--debian-dir DIR]  fashion-mnist: copied from Debian's dataset-fashion-mnist, installed with apt when root
  plugins [--plugins DIR]  list installed optimizer plugins
  version                  print the libtorch this host uses
`

// Main runs the host command with args (without the program name) and
// returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := plugin.CleanupOnSignal(context.Background())
	defer stop()
	defer plugin.CleanupAll()
	var err error
	switch args[0] {
	case "run":
		err = runCmd(ctx, args[1:], stdout, stderr)
	case "check":
		err = checkCmd(ctx, args[1:], stdout, stderr)
	case "table":
		err = untilDone(ctx, func() error { return tableCmd(stdout, args[1:]) })
	case "landscape":
		err = landscapeCmd(ctx, args[1:], stdout, stderr)
	case "plot":
		err = untilDone(ctx, func() error { return plotCmd(ctx, args[1:], stdout, stderr) })
	case "data":
		err = dataCmd(ctx, args[1:], stdout, stderr)
	case "plugins":
		err = pluginsCmd(ctx, args[1:], stdout)
	case "version":
		for _, l := range tensor.Versions(ctx) {
			fmt.Fprintln(stdout, l)
		}
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "host: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "host:", strings.TrimRight(err.Error(), "\n"))
		return 1
	}
	return 0
}

// untilDone runs a command that does not watch ctx (reading files,
// rendering) and returns its error, or the cause of ctx as soon as it is
// done (Ctrl-C): the command's goroutine is left to the process's exit.
func untilDone(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// DefaultPluginDir is bin/plugins next to the host binary ($OPTLAB_PLUGINS
// wins).
func DefaultPluginDir() string {
	if d := os.Getenv("OPTLAB_PLUGINS"); d != "" {
		return d
	}
	exe, err := os.Executable()
	if err != nil {
		return filepath.Join("bin", "plugins")
	}
	return filepath.Join(filepath.Dir(exe), "plugins")
}

// parseInterleaved parses flags that may come before or after the
// positional arguments. A bad flag is returned as an error, for Main to
// print once; -h writes the flags' documentation to help and returns
// flag.ErrHelp.
func parseInterleaved(fs *flag.FlagSet, args []string, help io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(help, "flags of host %s:\n", fs.Name())
				fs.SetOutput(help)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, fmt.Errorf("%s: %w (`host %s -h` lists the flags)", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
