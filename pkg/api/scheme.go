package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/metrics/pkg/apis/metrics/install"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

var (
	// Scheme holds the internal and v1beta1 metrics types (with their conversions) and the meta types the generic
	// server needs to answer options, status and discovery.
	Scheme = runtime.NewScheme()
	// Codecs serves Scheme as JSON, YAML and protobuf.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	// The generic server encodes these unversioned types (errors, discovery) with our codecs.
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

// Resource names as clients see them; errors name them so `kubectl top` says what was missing.
var (
	nodeResource = metrics.Resource("nodemetrics")
	podResource  = metrics.Resource("podmetrics")
)

// APIGroupInfo returns the metrics.k8s.io group with the nodes and pods resources served by the given storages.
func APIGroupInfo(nodes, pods rest.Storage) genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(metrics.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	info.VersionedResourcesStorageMap[v1beta1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"nodes": nodes,
		"pods":  pods,
	}
	return info
}
