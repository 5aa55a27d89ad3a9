package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/compatibility"

	generatedopenapi "github.com/metrics-ring/metrics-ring/pkg/api/generated/openapi"
)

// ServerOptions are the generic apiserver options, the same set metrics-server v0.9 exposes (flags, defaults and
// meaning), so a metrics-server Deployment's arguments configure metrics-ring alike. There is no etcd.
type ServerOptions struct {
	GenericServerRunOptions *genericoptions.ServerRunOptions
	SecureServing           *genericoptions.SecureServingOptionsWithLoopback
	Authentication          *genericoptions.DelegatingAuthenticationOptions
	Authorization           *genericoptions.DelegatingAuthorizationOptions
	Audit                   *genericoptions.AuditOptions
	Features                *genericoptions.FeatureOptions
}

// NewServerOptions returns metrics-server's defaults: port 443, self-signed certificate in
// apiserver.local.config/certificates, delegated authentication and authorization through the cluster.
func NewServerOptions() *ServerOptions {
	return &ServerOptions{
		GenericServerRunOptions: genericoptions.NewServerRunOptionsForComponent("metrics-ring", compatibility.NewComponentGlobalsRegistry()),
		SecureServing:           genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication:          genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:           genericoptions.NewDelegatingAuthorizationOptions(),
		Audit:                   genericoptions.NewAuditOptions(),
		Features:                genericoptions.NewFeatureOptions(),
	}
}

// AddFlags adds the generic server flags in metrics-server's flag groups.
func (o *ServerOptions) AddFlags(fss *cliflag.NamedFlagSets) {
	o.GenericServerRunOptions.AddUniversalFlags(fss.FlagSet("generic"))
	o.SecureServing.AddFlags(fss.FlagSet("apiserver secure serving"))
	o.Authentication.AddFlags(fss.FlagSet("apiserver authentication"))
	o.Authorization.AddFlags(fss.FlagSet("apiserver authorization"))
	o.Audit.AddFlags(fss.FlagSet("apiserver audit log"))
	o.Features.AddFlags(fss.FlagSet("features"))
}

// Validate checks the generic server options.
func (o *ServerOptions) Validate() []error {
	var errs []error
	errs = append(errs, o.GenericServerRunOptions.Validate()...)
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.Audit.Validate()...)
	return errs
}

// Config builds the generic server configuration: TLS (a self-signed certificate in --cert-dir when none is given),
// delegated authentication (front-proxy request headers, client certificates, TokenReview) and authorization
// (SubjectAccessReview), audit, profiling, and OpenAPI v2 and v3 from the generated definitions.
func (o *ServerOptions) Config(version string) (*genericapiserver.Config, error) {
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	// Set before ApplyTo, which would otherwise fall back to it with a warning (metrics-server issue #1658).
	if err := o.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, fmt.Errorf("setting component globals: %w", err)
	}
	cfg := genericapiserver.NewConfig(codecs)
	if err := o.GenericServerRunOptions.ApplyTo(cfg); err != nil {
		return nil, fmt.Errorf("applying generic server options: %w", err)
	}
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("applying secure serving options: %w", err)
	}

	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "metrics-ring"
	cfg.OpenAPIConfig.Info.Version = version
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "metrics-ring"
	cfg.OpenAPIV3Config.Info.Version = version

	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, cfg.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("applying delegated authentication options: %w", err)
	}
	cfg.Authentication.Authenticator = authenticateFrontProxiesOnce(cfg.Authentication.Authenticator,
		cfg.Authentication.RequestHeaderConfig)
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("applying delegated authorization options: %w", err)
	}
	cfg.Authorization.Authorizer = authorizeBroadFirst(cfg.Authorization.Authorizer)
	if err := o.Audit.ApplyTo(cfg); err != nil {
		return nil, fmt.Errorf("applying audit options: %w", err)
	}
	// Profiling flags apply as in metrics-server; like it, we accept --enable-priority-and-fairness but keep the
	// max-in-flight limits: APF needs the flowcontrol API and its informers, which an aggregated read-only API
	// does not need.
	cfg.EnableProfiling = o.Features.EnableProfiling
	cfg.EnableContentionProfiling = o.Features.EnableContentionProfiling
	cfg.DebugSocketPath = o.Features.DebugSocketPath
	cfg.EffectiveVersion = utilcompatibility.DefaultBuildEffectiveVersion()
	return cfg, nil
}

// Deps is what the server reads: storage, the informers' listers, and what the health checks need.
type Deps struct {
	Snapshots Snapshots
	Nodes     NodeLister
	Pods      PodLister
	// NodeSelector (--node-selector) restricts the nodes served to those scraped.
	NodeSelector labels.Requirements
	// InformersSynced reports whether the node and pod informers have synced; nil means always.
	InformersSynced func() bool
	// Collection is the collection loop, whose policy /readyz and /livez ask.
	Collection Collection
	// MaxWatches bounds the watches open at once (default DefaultMaxWatches).
	MaxWatches int
	// MaxWatchesPerUser bounds one user's watches open at once; 0 means no per-user bound.
	MaxWatchesPerUser int
	// MaxBuilds bounds the lists, pages and watch events built at once (default twice GOMAXPROCS).
	MaxBuilds int
	// ReaderCacheBytes bounds what readers' builds keep between requests, shared fairly between users (default
	// DefaultReaderCacheBytes).
	ReaderCacheBytes int64
	// AnswerBytes bounds the answers nothing keeps while they are made and written (default DefaultAnswerBytes).
	AnswerBytes int64
}

// NewServer completes cfg and returns a GenericAPIServer serving metrics.k8s.io/v1 and v1beta1 with the /readyz and
// /livez checks of DESIGN.md section 3. /metrics is the generic server's (the component-base legacy registry),
// which includes apiserver_request_duration_seconds; the API's own metrics are registered there too.
func NewServer(cfg *genericapiserver.Config, d Deps) (*genericapiserver.GenericAPIServer, error) {
	registerMetrics()
	// Innermost, around the API handler: the user is known, and the generic timeout filter's deadline is set.
	chain := cfg.BuildHandlerChainFunc
	if chain == nil {
		chain = genericapiserver.DefaultBuildHandlerChain
	}
	cfg.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return chain(answersWritten(h), c)
	}
	s, err := cfg.Complete(nil).New("metrics-ring", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("creating the generic API server: %w", err)
	}
	// One run ID per server (one storage: resourceversion.go), and one bound of each kind for both resources;
	// shutdown ends every watch at once instead of waiting for their timeouts.
	r := newReaders(d)
	hub := r.watches
	nodes, pods := newNodeStorage(d.Snapshots, d.Nodes, d.NodeSelector, r), newPodStorage(d.Snapshots, d.Pods, r)
	// Pre-shutdown hooks run as soon as shutdown starts, but watches are served through --shutdown-delay-duration
	// like every other request (while /readyz fails and endpoints drain); the server stops accepting requests
	// once both the delay and this hook are over.
	delay := s.ShutdownDelayDuration
	if err := s.AddPreShutdownHook("metrics-ring-end-watches", func() error {
		time.Sleep(delay)
		return hub.shutdown()
	}); err != nil {
		return nil, fmt.Errorf("adding the watch shutdown hook: %w", err)
	}
	info := apiGroupInfo(nodes, pods)
	if err := s.InstallAPIGroup(&info); err != nil {
		return nil, fmt.Errorf("installing metrics.k8s.io: %w", err)
	}
	if d.Collection == nil {
		return nil, errors.New("creating the API server: the collection loop is required for /readyz and /livez")
	}
	h := newHealthChecks(d.Collection, d.InformersSynced)
	if err := s.AddReadyzChecks(h.readyz()...); err != nil {
		return nil, fmt.Errorf("adding readyz checks: %w", err)
	}
	if err := s.AddLivezChecks(0, h.livez()...); err != nil {
		return nil, fmt.Errorf("adding livez checks: %w", err)
	}
	return s, nil
}
