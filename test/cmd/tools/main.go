// Command tools builds the programs the end-to-end tests and the demo run: etcd, kube-apiserver,
// kube-controller-manager and kubectl from the test module's pinned versions (only when missing from the
// cache), and metrics-ring from the main module (always; go build is incremental). It prints their paths.
// -print=helm builds only helm (framework.HelmVersion, for the chart tests) and prints its path; -print=thanos
// likewise thanos (framework.ThanosVersion, for the Prometheus source's tests against Thanos Query), and
// -print=kube-scheduler the pinned kube-scheduler (for the real install's tests).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

func main() {
	cache := flag.String("cache-dir", framework.DefaultCacheDir(), "where built tools are kept, by version")
	controlPlaneOnly := flag.Bool("control-plane-only", false, "skip building metrics-ring")
	only := flag.String("print", "", "print only this tool's path (etcd, kube-apiserver, kube-controller-manager, kubectl, metrics-ring, helm, thanos, kube-scheduler)")
	flag.Parse()
	if ensure, ok := map[string]func(string, io.Writer) (string, error){
		"helm": framework.EnsureHelm, "thanos": framework.EnsureThanos, "kube-scheduler": framework.EnsureScheduler,
	}[*only]; ok {
		path, err := ensure(*cache, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tools:", err)
			os.Exit(1)
		}
		fmt.Println(path)
		return
	}
	var (
		tools framework.Tools
		err   error
	)
	if *controlPlaneOnly {
		tools, err = framework.EnsureControlPlaneTools(*cache, os.Stderr)
	} else {
		tools, err = framework.EnsureTools(*cache, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tools:", err)
		os.Exit(1)
	}
	paths := []struct{ name, path string }{
		{"etcd", tools.Etcd}, {"kube-apiserver", tools.APIServer}, {"kube-controller-manager", tools.ControllerManager},
		{"kubectl", tools.Kubectl}, {"metrics-ring", tools.MetricsRing},
	}
	for _, p := range paths {
		if p.path != "" && (*only == "" || *only == p.name) {
			fmt.Println(p.path)
		}
	}
}
