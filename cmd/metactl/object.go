package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// objectArg is an object a subcommand is about, as kubectl names one:
// RESOURCE (plural, singular, short name or kind, optionally .group) and a
// name, with the connection that found it.
type objectArg struct {
	// loader is the kubeconfig as loaded; cfg the client configuration
	// from it.
	loader clientcmd.ClientConfig
	cfg    *rest.Config
	// mapping is the resource, resolved through discovery.
	mapping *meta.RESTMapping
	// namespace is the object's namespace (-n, else the kubeconfig
	// context's); empty for a cluster-scoped resource.
	namespace, name string
}

// connection is how a subcommand connects: as kubectl does (kubeFlags).
type connection struct {
	kubeFlags
	// command names the subcommand in the User-Agent.
	command string
	// timeout bounds each request; 0: none.
	timeout time.Duration
}

// resolveObject connects as c says and resolves resource, and the
// namespace of name (-n, else the kubeconfig context's).
func resolveObject(c connection, resource, name string) (*objectArg, error) {
	loader, cfg, err := c.load()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapping, err := resolveResource(restmapper.NewShortcutExpander(
		restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc, nil), resource)
	if err != nil {
		return nil, fmt.Errorf("%w (check the name with `kubectl api-resources`)", err)
	}
	o := &objectArg{loader: loader, cfg: cfg, mapping: mapping, name: name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.namespace, _, err = loader.Namespace(); err != nil {
			return nil, fmt.Errorf("the kubeconfig's namespace: %w", err)
		}
	}
	return o, nil
}

// load loads the kubeconfig as c says and returns it with the client
// configuration from it, which names c.command and is bounded by
// c.timeout.
func (c connection) load() (clientcmd.ClientConfig, *rest.Config, error) {
	loader, cfg, err := c.kubeFlags.load(c.command)
	if err != nil {
		return nil, nil, err
	}
	cfg.Timeout = c.timeout
	return loader, cfg, nil
}

// objectArgs reads RESOURCE/NAME, or RESOURCE NAME as kubectl also
// takes it.
func objectArgs(args []string) (resource, name string, err error) {
	if len(args) == 2 {
		resource, name = args[0], args[1]
	} else {
		var ok bool
		if resource, name, ok = strings.Cut(args[0], "/"); !ok {
			return "", "", fmt.Errorf("%q: want RESOURCE/NAME, such as helloworlds/your-name", args[0])
		}
	}
	if resource == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want RESOURCE/NAME, such as helloworlds/your-name", strings.Join(args, " "))
	}
	return resource, name, nil
}

// readObjects reads the objects of a YAML or JSON file (- is stdin),
// several YAML documents included.
func readObjects(file string) ([]*unstructured.Unstructured, error) {
	var (
		data []byte
		err  error
	)
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: an object without apiVersion or kind", file)
		}
		out = append(out, u)
	}
}
