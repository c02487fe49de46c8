// Command kcp is one binary that runs each component of a small, real
// Kubernetes control plane: embedded etcd, kube-apiserver and
// kube-controller-manager. Each component runs as its own process
// (`kcp etcd ...`, `kcp kube-apiserver ...`, `kcp kube-controller-manager ...`)
// because the upstream commands install process-wide signal handlers that may
// be set up only once per process.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

const usage = `usage: kcp COMMAND [flags]

commands:
  etcd                      embedded etcd (single member, for throwaway clusters)
  kube-apiserver            the upstream kube-apiserver
  kube-controller-manager   the upstream kube-controller-manager
  version                   print the Kubernetes version this binary was built from
`

func main() {
	args := os.Args[1:]
	// Also answer to the component's name, so a symlink named
	// kube-apiserver behaves like `kcp kube-apiserver`.
	switch name := filepath.Base(os.Args[0]); name {
	case "etcd", "kube-apiserver", "kube-controller-manager":
		args = append([]string{name}, args...)
	}
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, rest := args[0], args[1:]
	watchLifeline()
	switch cmd {
	case "etcd":
		os.Exit(runEtcd(rest))
	case "kube-apiserver":
		c := apiserver.NewAPIServerCommand()
		c.SetArgs(rest)
		os.Exit(cli.Run(c))
	case "kube-controller-manager":
		c := controllermanager.NewControllerManagerCommand()
		c.SetArgs(rest)
		os.Exit(cli.Run(c))
	case "version":
		fmt.Println(version.Get().GitVersion)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kcp: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
}
