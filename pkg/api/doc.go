// Package api owns metrics-ring's metrics.k8s.io/v1beta1 API: the REST storage for NodeMetrics (`nodes`) and
// PodMetrics (`pods`), their Table form, and the k8s.io/apiserver GenericAPIServer that serves them with delegated
// authentication and authorization, OpenAPI, and the /readyz and /livez checks of DESIGN.md section 3.
//
// Objects are listed from informers (nodes, and Running pods as metadata only) and their values read from storage;
// nothing here ever calls a source on the request path.
package api
