// Command bsam serves the bsam optimizer as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(bsam.New) }
