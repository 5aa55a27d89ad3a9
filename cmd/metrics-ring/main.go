// Command metrics-ring serves metrics.k8s.io/v1 and v1beta1 (NodeMetrics, PodMetrics) as a Kubernetes aggregated API
// server, fed by a kubelet scraper or Prometheus through an in-memory ring buffer: a drop-in for metrics-server.
// main only starts the command; its flags and wiring are package app's.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"

	"github.com/metrics-ring/metrics-ring/cmd/metrics-ring/app"
)

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()

	cmd := app.NewCommand(genericapiserver.SetupSignalContext())
	if err := cmd.Execute(); err != nil {
		logs.FlushLogs()
		os.Exit(1)
	}
}
