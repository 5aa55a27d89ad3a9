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
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

var (
	// scheme has the internal, v1 and v1beta1 metrics types (with their conversions; v1 the preferred version)
	// and the meta types the generic server needs to answer options, status and discovery.
	scheme = runtime.NewScheme()
	// codecs serves scheme as JSON, YAML and protobuf.
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	install.Install(scheme)
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	// The generic server encodes these unversioned types (errors, discovery) with our codecs.
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

// Resource names as clients see them; errors name them so `kubectl top` says what was missing.
var (
	nodeResource = metrics.Resource("nodemetrics")
	podResource  = metrics.Resource("podmetrics")
)

// servedVersions are the versions of metrics.k8s.io served, preferred first: v1 (GA in Kubernetes 1.37, read by kubectl
// 1.37) and v1beta1 (read by the HPA and VPA, and the only one clusters before 1.37 register an APIService for).
var servedVersions = []string{metricsv1.SchemeGroupVersion.Version, v1beta1.SchemeGroupVersion.Version}

// apiGroupInfo returns the metrics.k8s.io group with the nodes and pods resources served by the given storages in
// every version of servedVersions: the same storage, so both versions answer from one snapshot with one set of builds
// (the objects are internal; each request's codec converts them to its version, and the shared encodings are
// keyed by that codec, so they never mix versions).
func apiGroupInfo(nodes, pods rest.Storage) genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(metrics.GroupName, scheme, metav1.ParameterCodec, codecs)
	for _, v := range servedVersions {
		info.VersionedResourcesStorageMap[v] = map[string]rest.Storage{"nodes": nodes, "pods": pods}
	}
	return info
}
