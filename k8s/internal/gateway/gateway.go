// Package gateway is hutch's entry point in a cluster (hutch-gateway): clients speak hutch's own
// HTTP API (docs/api.md) to it. Creating, listing, stopping, starting and removing boxes become
// changes to Box objects (the scheduler places them); everything addressed to one box (exec,
// files, logs, ports, checkpoints) is looked up Box -> node -> that node's agent and proxied
// to the node's hutchd, upgraded connections (exec streams, WebSockets) included.
package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "hutch.dev/k8s/api/v1alpha1"
	"hutch.dev/k8s/internal/kube"
)

type Gateway struct {
	c         *kube.Clients
	keys      map[string]string // API key -> namespace (the key's owner)
	nodeToken string
	Wait      time.Duration     // how long a create, start or stop waits for the box
	Transport http.RoundTripper // to node agents (TLS verified against the cluster's CA)
}

func New(c *kube.Clients, keys map[string]string, nodeToken string) *Gateway {
	return &Gateway{c: c, keys: keys, nodeToken: nodeToken, Wait: 10 * time.Minute}
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (g *Gateway) namespace(r *http.Request) (string, bool) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if key == "" {
		key = r.Header.Get("X-API-Key")
	}
	for k, ns := range g.keys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			return ns, true
		}
	}
	return "", false
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ns, ok := g.namespace(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeErr(w, 401, "unauthenticated", "This gateway needs an API key (Authorization: Bearer KEY)")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/boxes")
	if !ok {
		writeErr(w, 404, "not_found", "The gateway serves /v1/boxes and what is below it")
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(rest, "/"), "/", 2)
	switch {
	case rest == "" || rest == "/":
		switch r.Method {
		case "GET":
			g.list(w, r, ns)
		case "POST":
			g.create(w, r, ns)
		default:
			writeErr(w, 405, "unsupported", "GET or POST /v1/boxes")
		}
	case len(parts) == 1 && r.Method == "GET":
		g.get(w, r, ns, parts[0])
	case len(parts) == 1 && r.Method == "DELETE":
		g.remove(w, r, ns, parts[0])
	case len(parts) == 2 && r.Method == "POST" && (parts[1] == "stop" || parts[1] == "start"):
		g.runState(w, r, ns, parts[0], parts[1] == "start")
	default:
		g.proxy(w, r, ns, parts[0], "/"+strings.Join(parts[1:], "/"))
	}
}

type createRequest struct {
	Name      string `json:"name"`
	Template  string `json:"template"`
	CPUs      int64  `json:"cpus"`
	MemoryMiB int64  `json:"memory_mib"`
	DiskMiB   int64  `json:"disk_mib"`
	Fork      string `json:"fork"` // gateway extension: fork this box (spec.source.box)
}

func (g *Gateway) create(w http.ResponseWriter, r *http.Request, ns string) {
	var req createRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeErr(w, 400, "invalid_argument", "Bad request body: "+err.Error())
		return
	}
	if req.Name == "" {
		writeErr(w, 400, "invalid_argument", "A box created through the gateway needs a name (it names the Box object)")
		return
	}
	if req.Template == "" && req.Fork == "" {
		req.Template = "base"
	}
	res := map[string]any{}
	if req.CPUs > 0 {
		res["cpus"] = req.CPUs
	}
	if req.MemoryMiB > 0 {
		res["memoryMiB"] = req.MemoryMiB
	}
	if req.DiskMiB > 0 {
		res["diskMiB"] = req.DiskMiB
	}
	spec := map[string]any{"resources": res}
	if req.Fork != "" {
		spec["source"] = map[string]any{"box": req.Fork}
	} else {
		spec["template"] = req.Template
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1.Group + "/" + v1.Version, "kind": "Box",
		"metadata": map[string]any{"name": req.Name, "namespace": ns}, "spec": spec}}
	if _, err := g.c.Dynamic.Resource(v1.BoxGVR).Namespace(ns).Create(r.Context(), u, metav1.CreateOptions{}); err != nil {
		g.kubeErr(w, err)
		return
	}
	g.waitAndAnswer(w, r, ns, req.Name, v1.PhaseRunning, 201)
}

func (g *Gateway) kubeErr(w http.ResponseWriter, err error) {
	switch {
	case apierrors.IsAlreadyExists(err):
		writeErr(w, 409, "already_exists", err.Error())
	case apierrors.IsNotFound(err):
		writeErr(w, 404, "not_found", err.Error())
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		writeErr(w, 400, "invalid_argument", err.Error())
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		writeErr(w, 429, "resource_exhausted", err.Error())
	case apierrors.IsForbidden(err):
		writeErr(w, 403, "permission_denied", err.Error())
	default:
		writeErr(w, 503, "unavailable", err.Error())
	}
}

func (g *Gateway) box(ctx context.Context, ns, name string) (*v1.Box, error) {
	u, err := g.c.Dynamic.Resource(v1.BoxGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var b v1.Box
	return &b, v1.FromUnstructured(u, &b)
}

// waitAndAnswer polls the Box until it reaches phase (or fails, or waits on the scheduler past
// the deadline) and answers with it.
func (g *Gateway) waitAndAnswer(w http.ResponseWriter, r *http.Request, ns, name, phase string, status int) {
	deadline := time.Now().Add(g.Wait)
	for {
		b, err := g.box(r.Context(), ns, name)
		if err != nil {
			g.kubeErr(w, err)
			return
		}
		switch {
		case b.Status.Phase == phase:
			writeJSON(w, status, render(b))
			return
		case b.Status.Phase == v1.PhaseFailed:
			writeErr(w, 503, "unavailable", fmt.Sprintf("Box %s failed on node %s: %s", name, b.Status.NodeName, b.Status.Message))
			return
		case time.Now().After(deadline), r.Context().Err() != nil:
			writeErr(w, 504, "timeout", fmt.Sprintf("Box %s is %s after %s: %s", name, b.Status.Phase, g.Wait, b.Status.Message))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func render(b *v1.Box) map[string]any {
	return map[string]any{"name": b.Name, "id": b.Status.BoxID, "node": b.Status.NodeName, "phase": b.Status.Phase,
		"state": strings.ToLower(b.Status.Phase), "template": b.Spec.Template, "cpus": b.CPUs(), "memory_mib": b.MemoryMiB(),
		"message": b.Status.Message}
}

func (g *Gateway) list(w http.ResponseWriter, r *http.Request, ns string) {
	l, err := g.c.Dynamic.Resource(v1.BoxGVR).Namespace(ns).List(r.Context(), metav1.ListOptions{})
	if err != nil {
		g.kubeErr(w, err)
		return
	}
	out := []any{}
	for i := range l.Items {
		var b v1.Box
		if v1.FromUnstructured(&l.Items[i], &b) == nil {
			out = append(out, render(&b))
		}
	}
	writeJSON(w, 200, map[string]any{"boxes": out})
}

func (g *Gateway) get(w http.ResponseWriter, r *http.Request, ns, name string) {
	b, err := g.box(r.Context(), ns, name)
	if err != nil {
		g.kubeErr(w, err)
		return
	}
	writeJSON(w, 200, render(b))
}

func (g *Gateway) remove(w http.ResponseWriter, r *http.Request, ns, name string) {
	if err := g.c.Dynamic.Resource(v1.BoxGVR).Namespace(ns).Delete(r.Context(), name, metav1.DeleteOptions{}); err != nil {
		g.kubeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"removed": name})
}

func (g *Gateway) runState(w http.ResponseWriter, r *http.Request, ns, name string, run bool) {
	state, phase := "Stopped", v1.PhaseStopped
	if run {
		state, phase = "Running", v1.PhaseRunning
	}
	if err := g.c.PatchBox(r.Context(), ns, name, map[string]any{"spec": map[string]any{"runState": state}}); err != nil {
		g.kubeErr(w, err)
		return
	}
	g.waitAndAnswer(w, r, ns, name, phase, 200)
}

// proxy sends a request for one box to the agent of the node that runs it.
func (g *Gateway) proxy(w http.ResponseWriter, r *http.Request, ns, name, sub string) {
	b, err := g.box(r.Context(), ns, name)
	if err != nil {
		g.kubeErr(w, err)
		return
	}
	if b.Status.NodeName == "" || b.Status.BoxID == "" {
		writeErr(w, 409, "failed_precondition", fmt.Sprintf("Box %s is %s and on no node yet", name, b.Status.Phase))
		return
	}
	node, err := g.c.Core.CoreV1().Nodes().Get(r.Context(), b.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		g.kubeErr(w, err)
		return
	}
	endpoint := node.Annotations[v1.AnnotationEndpoint]
	target, err := url.Parse(endpoint)
	if err != nil || endpoint == "" {
		writeErr(w, 503, "unavailable", fmt.Sprintf("Node %s has no node agent endpoint (%s)", node.Name, v1.AnnotationEndpoint))
		return
	}
	rp := &httputil.ReverseProxy{
		Transport: g.Transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = "/hutchd/v1/boxes/" + url.PathEscape(b.Status.BoxID) + sub
			pr.Out.URL.RawPath = ""
			pr.Out.Header.Set("Authorization", "Bearer "+g.nodeToken)
			pr.Out.Header.Del("X-API-Key")
			pr.Out.Header.Set("X-Hutch-Node", node.Name)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeErr(w, 502, "unavailable", fmt.Sprintf("Node %s (%s) does not answer: %v", node.Name, endpoint, err))
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("X-Hutch-Node", node.Name)
			return nil
		},
	}
	rp.ServeHTTP(w, r)
}

// ParseKeys reads "KEY NAMESPACE" lines.
func ParseKeys(text string) (map[string]string, error) {
	keys := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("keys file line %d: want 'KEY NAMESPACE'", i+1)
		}
		keys[f[0]] = f[1]
	}
	if len(keys) == 0 {
		log.Printf("gateway: no keys: every request will be refused")
	}
	return keys, nil
}
