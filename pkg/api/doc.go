// Package api owns metrics-ring's metrics.k8s.io API, v1 and v1beta1 from the same storage: the REST storage for
// NodeMetrics (`nodes`) and PodMetrics (`pods`), one generic type with a small per-kind part, their Table form, and
// the k8s.io/apiserver GenericAPIServer that serves them with delegated authentication and authorization, OpenAPI,
// and the /readyz and /livez checks of DESIGN.md section 3.
//
// Objects are listed from informers (nodes, and Running pods as metadata only) and their values read from storage;
// nothing here ever calls a source on the request path. Readers share work per snapshot (build.go): every list,
// page and watch of one collection and selection shares one build, and the builds running at once are bounded.
package api
