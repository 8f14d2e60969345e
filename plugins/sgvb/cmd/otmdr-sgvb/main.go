// Command otmdr-sgvb serves the otmdr-sgvb optimizer (OT-MDR on a
// mean-field Gaussian BNN) as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("otmdr-sgvb")) }
