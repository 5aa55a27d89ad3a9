package framework

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for server that trusts caPEM and authenticates with the client
// certificate, with the data embedded so the file can be copied around.
func writeKubeconfig(file, server string, caPEM []byte, user string, kp *KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", file, err)
	}
	return nil
}

// restConfig is the client-go config for the same identity.
func restConfig(server string, caPEM []byte, kp *KeyPair) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: caPEM, CertData: kp.CertPEM, KeyData: kp.KeyPEM,
		},
		QPS: 200, Burst: 400,
	}
}

// UserKubeconfig issues a client certificate for user in groups (signed by the cluster's client CA) and
// writes a kubeconfig for it. It returns the kubeconfig path and the rest config.
func (cp *ControlPlane) UserKubeconfig(user string, groups ...string) (string, *rest.Config, error) {
	name := "user-" + user
	kp, err := cp.ClientCA.Issue(cp.Dir, name, CertSpec{CommonName: user, Organization: groups})
	if err != nil {
		return "", nil, err
	}
	file := filepath.Join(cp.Dir, name+".kubeconfig")
	if err := writeKubeconfig(file, cp.URL, cp.ServerCA.CertPEM, user, kp); err != nil {
		return "", nil, err
	}
	return file, restConfig(cp.URL, cp.ServerCA.CertPEM, kp), nil
}
