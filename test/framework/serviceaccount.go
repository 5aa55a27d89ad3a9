package framework

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TokenKubeconfig writes dir/<name>.kubeconfig for kube-apiserver that authenticates with a bearer token, such
// as a ServiceAccount token from the TokenRequest API (kubectl create token), so a process can run as the
// identity an in-cluster Deployment would have.
func (cp *ControlPlane) TokenKubeconfig(name, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.ServerCA.CertPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = "local"
	file := filepath.Join(cp.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return "", fmt.Errorf("writing kubeconfig %s: %w", file, err)
	}
	return file, nil
}

// IdentityArgs are metrics-ring flags that make it use kubeconfig for everything it asks kube-apiserver:
// informers, and delegated authentication (TokenReview, the extension-apiserver-authentication ConfigMap) and
// authorization (SubjectAccessReview). Put them in BackendConfig.Args: they come after StartBackend's own
// flags, and the last value of a flag wins, so the backend runs as that identity instead of MetricsRingUser.
func IdentityArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}
}
