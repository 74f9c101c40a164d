package explain

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigExtension is the name of the kubeconfig context extension in
// which `metactl dev` records where its metactl serves Path, so that
// `metactl explain` reaches it without flags. kubectl and client-go keep
// extensions they do not know.
const KubeconfigExtension = "metactl.io/explain"

type extension struct {
	// Endpoint is http://host:port, for Fetch.
	Endpoint string `json:"endpoint"`
}

// RecordEndpoint writes endpoint into the current context of the
// kubeconfig file at path, as the extension KubeconfigExtension.
func RecordEndpoint(path, endpoint string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return fmt.Errorf("kubeconfig %s has no current context", path)
	}
	raw, err := json.Marshal(extension{Endpoint: endpoint})
	if err != nil {
		return err
	}
	if ctx.Extensions == nil {
		ctx.Extensions = map[string]runtime.Object{}
	}
	ctx.Extensions[KubeconfigExtension] = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	return clientcmd.WriteToFile(*cfg, path)
}

// RecordedEndpoint returns the endpoint RecordEndpoint wrote into the
// context named context of cfg (the current context when empty); "" when
// there is none.
func RecordedEndpoint(cfg clientcmdapi.Config, context string) string {
	if context == "" {
		context = cfg.CurrentContext
	}
	ctx := cfg.Contexts[context]
	if ctx == nil {
		return ""
	}
	u, ok := ctx.Extensions[KubeconfigExtension].(*runtime.Unknown)
	if !ok {
		return ""
	}
	var e extension
	if json.Unmarshal(u.Raw, &e) != nil {
		return ""
	}
	return e.Endpoint
}
