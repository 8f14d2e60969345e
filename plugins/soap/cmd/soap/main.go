// Command soap serves the soap optimizer (SOAP, Vyas et al. 2024: Adam in
// the eigenbasis of Shampoo's factors, as the official soap.py) as an
// optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("soap")) }
