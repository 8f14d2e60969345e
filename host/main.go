// Command host is optlab's host process: it owns the models, the data and
// the device, runs experiments whose optimizers are plugin processes, and
// prints result tables. Run `host help` for the commands.
package main

import (
	"os"

	"github.com/optlab/optlab/host/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
