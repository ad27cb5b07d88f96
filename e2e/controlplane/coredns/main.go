// CoreDNS with the plugins the real node's Corefile uses (realnode_config.corefile),
// built by build-binaries.sh node from the pinned CoreDNS module.
//
// Upstream's main package imports every plugin it ships (core/plugin), and with them
// the cloud providers' SDKs the node never uses: a fifth more CPU to compile cold, and
// their modules to download. CoreDNS documents choosing plugins at compile time; this main does it by
// importing only these (coremain registers the DNS server type and keeps upstream's
// directive order). A plugin added to the Corefile must be added here too: CoreDNS
// refuses a directive it was not built with, so the real node's tests would say so.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func main() {
	coremain.Run()
}
