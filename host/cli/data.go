package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/plugin"
)

const dataUsage = "usage: host data get cifar10|cifar100|fashion-mnist|mnist --dir D"

func dataCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "get" {
		return errors.New(dataUsage)
	}
	fs := flag.NewFlagSet("data get", flag.ContinueOnError)
	dir := fs.String("dir", "", "folder to put the dataset in (default data/cifar for CIFAR, data/<dataset> otherwise)")
	base := fs.String("url", "", "base URL of the files (default: the dataset's published address)")
	sum := fs.String("md5", "", "MD5 (hex) the CIFAR archive must have, for a mirror with its own archive (default: the published one)")
	noApt := fs.Bool("no-apt", false, "fashion-mnist: do not install Debian's dataset-fashion-mnist with apt-get when it is missing and running as root (download instead)")
	debDir := fs.String("debian-dir", "", "fashion-mnist: folder of Debian's dataset-fashion-mnist files, copied from when present (default "+data.DebianFashionMNISTDir+")")
	pos, err := parseInterleaved(fs, args[1:], stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(dataUsage)
	}
	if *dir == "" {
		*dir = "data/" + pos[0]
		if pos[0] == data.CIFAR10 || pos[0] == data.CIFAR100 {
			*dir = "data/cifar"
		}
	}
	where, err := data.Get(ctx, pos[0], *dir, data.GetOptions{BaseURL: *base, MD5: *sum, Progress: stderr,
		NoApt: *noApt, DebianDir: *debDir})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is in %s\n", pos[0], where)
	return nil
}

func pluginsCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plugins", flag.ContinueOnError)
	dir := fs.String("plugins", DefaultPluginDir(), "plugin directory")
	if _, err := parseInterleaved(fs, args, stdout); err != nil {
		return err
	}
	list, err := plugin.List(ctx, *dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "plugins in %s:\n", *dir)
	for _, p := range list {
		if p.Err != nil {
			fmt.Fprintf(stdout, "  %-12s error: %v\n", p.Name, p.Err)
			continue
		}
		fmt.Fprintf(stdout, "  %-12s %-8s protocol 1.%d  %d hyperparameters\n", p.Name, p.Info.Version, p.Info.ProtocolMinor, len(p.Info.Params))
	}
	return nil
}
