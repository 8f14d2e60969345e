// Command sgvb serves the sgvb optimizer (plain SGVB, Bayes by backprop)
// as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("sgvb")) }
