// Command sgd serves the sgd optimizer as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(sgd.New) }
