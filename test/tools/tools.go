//go:build tools

// Package tools pins the control-plane programs the end-to-end tests build from source.
package tools

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
	_ "k8s.io/kubernetes/pkg/kubelet/metrics/collectors"
)
