// Package kube holds what hutch's Kubernetes programs share: client set-up, status patches.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "hutch.dev/k8s/api/v1alpha1"
)

func init() {
	// client-go's streaming lists (sendInitialEvents) are newer than some servers hutch runs
	// against (Kubernetes 1.20 here); plain list+watch works on every version.
	if os.Getenv("KUBE_FEATURE_WatchListClient") == "" {
		os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
}

// Clients are the typed and the dynamic client of one apiserver.
type Clients struct {
	Config  *rest.Config
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Connect reads a kubeconfig (or the in-cluster config when path is "") and makes clients
// that may send qps requests a second.
func Connect(path string, qps float32, agent string, protobuf ...bool) (*Clients, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the Kubernetes client configuration (pass --kubeconfig or set KUBECONFIG): %w", err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = qps, int(qps*2), agent
	coreCfg := rest.CopyConfig(cfg)
	if len(protobuf) > 0 && protobuf[0] {
		// Built-in objects in protobuf: lists of thousands of pods cost a fraction of JSON.
		coreCfg.ContentType = "application/vnd.kubernetes.protobuf"
		coreCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	core, err := kubernetes.NewForConfig(coreCfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Config: cfg, Core: core, Dynamic: dyn}, nil
}

// PatchBoxStatus merges fields into a Box's status (the status subresource).
func (c *Clients) PatchBoxStatus(ctx context.Context, ns, name string, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = c.Dynamic.Resource(v1.BoxGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1PatchOptions, "status")
	return err
}

// PatchBox merges fields into a Box's metadata or spec.
func (c *Clients) PatchBox(ctx context.Context, ns, name string, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.Dynamic.Resource(v1.BoxGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, body, metav1PatchOptions)
	return err
}
