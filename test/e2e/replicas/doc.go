// Package replicas holds the end-to-end tests of two metrics-ring replicas behind one Service, as the
// high-availability overlay runs them: kube-apiserver with --enable-aggregator-routing=true picks a replica per
// request, so the pages of one list and a watch and its resumption reach either (DESIGN.md section 2, the limit and
// continue and resourceVersion rows).
package replicas
