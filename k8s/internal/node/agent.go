// Package node is hutch's node agent (hutch-node): it runs beside one hutchd, registers the node
// with the apiserver and keeps it alive, watches the box pods the scheduler bound to its node
// and the Boxes they belong to, and drives its hutchd through hutchd's HTTP API to make them
// real: restore from a template (fetched from a peer node as checksummed chunks when this node
// lacks it), fork, stop, start, remove. It reports each Box's state in its status and the
// node's hutchd health as a node condition and taint. It serves its peers (chunks) and the
// gateway (a reverse proxy to its hutchd) on one HTTP listener.
//
// In a cluster with kubelets the box pod's launcher container runs under the kubelet, which
// reports the pod's status; in the kubelet-less test bed here (docs/capacity.md) the agent
// also writes the box pods' status, as a virtual kubelet limited to box pods would.
package node

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	v1 "hutch.dev/k8s/api/v1alpha1"
	"hutch.dev/k8s/internal/chunks"
	"hutch.dev/k8s/internal/hutchd"
	"hutch.dev/k8s/internal/kube"
	"hutch.dev/k8s/internal/tlsflags"
)

type Config struct {
	NodeName   string
	Socket     string // hutchd's unix socket
	ImageCache string // hutchd's --image-cache: fetched templates are put in its images/
	Listen     string // ADDR:PORT of the agent's HTTP listener
	Advertise  string // URL peers and the gateway use to reach it
	Token      string // shared by node agents and the gateway
	CPUs       int64
	MemoryMiB  int64
	MaxPods    int64
	TLS        tlsflags.Flags // its listener's certificate; the CA its peers' are checked against
}

type Agent struct {
	cfg     Config
	c       *kube.Clients
	hd      *hutchd.Client
	store   *chunks.Store
	boxes   cache.SharedIndexInformer
	tmpls   cache.SharedIndexInformer
	pods    listerscorev1.PodLister
	queue   workqueue.TypedRateLimitingInterface[string]
	synced  []cache.InformerSynced
	start   func(<-chan struct{})
	mu      sync.Mutex
	busy    map[string]bool // boxes with a slow hutchd call under way
	healthy bool
	peers   *http.Client // to other node agents, over TLS verified against the cluster's CA
	tmplMu  sync.Mutex   // one template build or fetch at a time
}

func New(cfg Config, c *kube.Clients) (*Agent, error) {
	if cfg.NodeName == "" || cfg.Socket == "" {
		return nil, fmt.Errorf("a node name and hutchd's socket are required")
	}
	transport, err := cfg.TLS.Transport()
	if err != nil {
		return nil, err
	}
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, 10*time.Minute, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = v1.LabelNodeName + "=" + cfg.NodeName
	})
	tmplInf := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, 10*time.Minute)
	podInf := informers.NewSharedInformerFactoryWithOptions(c.Core, 10*time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		o.LabelSelector = v1.LabelBox
	}))
	a := &Agent{cfg: cfg, c: c, hd: hutchd.New(cfg.Socket), store: chunks.NewStore(),
		boxes: dyn.ForResource(v1.BoxGVR).Informer(), tmpls: tmplInf.ForResource(v1.BoxTemplateGVR).Informer(),
		pods:  podInf.Core().V1().Pods().Lister(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		busy:  map[string]bool{}, healthy: true, peers: &http.Client{Transport: transport}}
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *corev1.Pod:
			a.queue.Add(o.Namespace + "/" + o.Labels[v1.LabelBox])
		case *unstructured.Unstructured:
			a.queue.Add(o.GetNamespace() + "/" + o.GetName())
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}
	podInf.Core().V1().Pods().Informer().AddEventHandler(h)
	a.boxes.AddEventHandler(h)
	a.tmpls.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) { a.queue.Add("template/" + o.(*unstructured.Unstructured).GetName()) },
		UpdateFunc: func(_, o any) { a.queue.Add("template/" + o.(*unstructured.Unstructured).GetName()) }})
	a.synced = []cache.InformerSynced{a.boxes.HasSynced, a.tmpls.HasSynced, podInf.Core().V1().Pods().Informer().HasSynced}
	a.start = func(stop <-chan struct{}) { dyn.Start(stop); tmplInf.Start(stop); podInf.Start(stop) }
	return a, nil
}

// Run registers the node, then serves until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.register(ctx); err != nil {
		return err
	}
	if err := a.indexLocalTemplates(ctx); err != nil {
		log.Printf("node %s: %v", a.cfg.NodeName, err)
	}
	srv := &http.Server{Addr: a.cfg.Listen, Handler: a.handler()}
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", a.cfg.Listen, err)
	}
	go func() {
		if err := a.cfg.TLS.Serve(srv, ln); err != nil && err != http.ErrServerClosed {
			log.Printf("node %s: listener: %v", a.cfg.NodeName, err)
		}
	}()
	defer srv.Close()
	a.start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), a.synced...) {
		return fmt.Errorf("caches did not sync")
	}
	go a.heartbeat(ctx)
	for i := 0; i < 4; i++ {
		go func() {
			for a.next(ctx) {
			}
		}()
	}
	log.Printf("node %s: serving (hutchd %s, listener %s)", a.cfg.NodeName, a.cfg.Socket, a.cfg.Listen)
	<-ctx.Done()
	a.queue.ShutDown()
	return nil
}

func (a *Agent) authorized(r *http.Request) bool {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return a.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.Token)) == 1
}

// handler: /manifests/, /chunks/ for peers; /hutchd/ proxied to the local hutchd for the gateway.
func (a *Agent) handler() http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "http", "hutchd", "hutchd"
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/hutchd")
			r.Out.URL.RawPath = ""
			r.Out.Header.Del("Authorization")
		},
		Transport: a.hd.Transport(),
	}
	mux := http.NewServeMux()
	mux.Handle("/manifests/", a.store)
	mux.Handle("/chunks/", a.store)
	mux.Handle("/hutchd/", proxy)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthenticated","message":"This node agent needs the cluster's node token"}}`))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (a *Agent) register(ctx context.Context) error {
	name := a.cfg.NodeName
	// The node lifecycle controller writes a new Node right after it is created (its taints):
	// an update made from the object read before that is a conflict, so read it again and retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := a.c.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n, err = a.c.Core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		}
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Labels["kubernetes.io/hostname"], n.Labels[v1.LabelNode], n.Labels["kubernetes.io/os"] = name, "true", "linux"
		n.Annotations[v1.AnnotationEndpoint] = a.cfg.Advertise
		_, err = a.c.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot register node %s: %w", name, err)
	}
	return a.updateNodeStatus(ctx, true, "")
}

func (a *Agent) updateNodeStatus(ctx context.Context, hutchdOK bool, why string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := a.c.Core.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(a.cfg.CPUs, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(a.cfg.MemoryMiB<<20, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(a.cfg.MaxPods, resource.DecimalSI),
		}
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity
		now := metav1.Now()
		set := func(t corev1.NodeConditionType, ok bool, reason, msg string) {
			st := corev1.ConditionFalse
			if ok {
				st = corev1.ConditionTrue
			}
			for i := range n.Status.Conditions {
				c := &n.Status.Conditions[i]
				if c.Type == t {
					if c.Status != st {
						c.LastTransitionTime = now
					}
					c.Status, c.Reason, c.Message, c.LastHeartbeatTime = st, reason, msg, now
					return
				}
			}
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now})
		}
		set(corev1.NodeReady, true, "HutchNodeAgentReady", "hutch-node is running")
		if hutchdOK {
			set(v1.ConditionHutchd, true, "HutchdAnswers", "hutchd answers on "+a.cfg.Socket)
		} else {
			set(v1.ConditionHutchd, false, "HutchdDown", why)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: a.cfg.NodeName}}
		_, err = a.c.Core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// setTaint puts on or takes off the hutchd-down taint: the scheduler sends no new box here
// while hutchd does not answer.
func (a *Agent) setTaint(ctx context.Context, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := a.c.Core.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		has := false
		for _, t := range n.Spec.Taints {
			if t.Key == v1.TaintHutchdDown {
				has = true
				continue
			}
			keep = append(keep, t)
		}
		if on == has {
			return nil
		}
		if on {
			keep = append(keep, corev1.Taint{Key: v1.TaintHutchdDown, Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = keep
		_, err = a.c.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// heartbeat renews the node's Lease (what the node lifecycle controller watches, as for a
// kubelet) every 5 s, probes hutchd every 2 s, and refreshes the node status every 20 s.
func (a *Agent) heartbeat(ctx context.Context) {
	leases := a.c.Core.CoordinationV1().Leases("kube-node-lease")
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var lastLease, lastStatus time.Time
	for {
		if time.Since(lastLease) >= 5*time.Second {
			if err := a.renewLease(ctx, leases); err != nil {
				log.Printf("node %s: lease: %v", a.cfg.NodeName, err)
			} else {
				lastLease = time.Now()
			}
		}
		_, err := a.hd.Info(ctx)
		ok := err == nil
		a.mu.Lock()
		changed := ok != a.healthy
		a.healthy = ok
		a.mu.Unlock()
		if changed || time.Since(lastStatus) >= 20*time.Second {
			why := ""
			if err != nil {
				why = err.Error()
			}
			if err := a.updateNodeStatus(ctx, ok, why); err == nil {
				lastStatus = time.Now()
			}
		}
		if changed {
			log.Printf("node %s: hutchd healthy=%v", a.cfg.NodeName, ok)
			if err := a.setTaint(ctx, !ok); err != nil {
				log.Printf("node %s: taint: %v", a.cfg.NodeName, err)
			}
			for _, o := range a.boxes.GetStore().List() { // re-examine every box of this node
				if b, err := v1.BoxFrom(o); err == nil && b.Status.NodeName == a.cfg.NodeName {
					a.queue.Add(b.Namespace + "/" + b.Name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (a *Agent) renewLease(ctx context.Context, leases interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
}) error {
	now := metav1.NewMicroTime(time.Now())
	holder, dur := a.cfg.NodeName, int32(40)
	l, err := leases.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Namespace: "kube-node-lease"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &dur, &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

func (a *Agent) next(ctx context.Context) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	var err error
	var again time.Duration
	if name, ok := strings.CutPrefix(key, "template/"); ok {
		again, err = a.reconcileTemplate(ctx, name)
	} else {
		again, err = a.reconcileBox(ctx, key)
	}
	switch {
	case err != nil:
		if !apierrors.IsConflict(err) {
			log.Printf("node %s: %s: %v", a.cfg.NodeName, key, err)
		}
		a.queue.AddRateLimited(key)
	case again > 0:
		a.queue.Forget(key)
		a.queue.AddAfter(key, again)
	default:
		a.queue.Forget(key)
	}
	return true
}

// HutchdName is the name a Box has in its node's hutchd: namespace.name, or a hash when that
// is longer than hutchd's 63 characters.
func HutchdName(ns, name string) string {
	n := ns + "." + name
	if len(n) <= 63 {
		return n
	}
	s := sha256.Sum256([]byte(n))
	return "box-" + hex.EncodeToString(s[:])[:40]
}

func (a *Agent) getBox(key string) (*v1.Box, error) {
	obj, ok, err := a.boxes.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, err
	}
	return v1.BoxFrom(obj)
}

func (a *Agent) status(ctx context.Context, b *v1.Box, fields map[string]any) error {
	same := true
	for k, v := range fields {
		switch k {
		case "phase":
			same = same && v == b.Status.Phase
		case "message":
			same = same && v == b.Status.Message
		case "nodeName":
			same = same && v == b.Status.NodeName
		case "boxID":
			same = same && v == b.Status.BoxID
		case "snapshot":
			s, _ := v.(map[string]any)
			same = same && b.Status.Snapshot != nil && s["node"] == b.Status.Snapshot.Node && s["name"] == b.Status.Snapshot.Name
		default:
			same = false
		}
	}
	if same {
		return nil
	}
	return a.c.PatchBoxStatus(ctx, b.Namespace, b.Name, fields)
}

// markPod writes the box pod's status as a kubelet would (kubelet-less test bed).
func (a *Agent) markPod(ctx context.Context, pod *corev1.Pod, running bool) error {
	want := corev1.PodPending
	if running {
		want = corev1.PodRunning
	}
	if pod.Status.Phase == want {
		return nil
	}
	p := pod.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = want
	ready := corev1.ConditionFalse
	if running {
		ready = corev1.ConditionTrue
		p.Status.StartTime = &now
	}
	p.Status.Conditions = append(p.Status.Conditions[:0:0], corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: now})
	_, err := a.c.Core.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// slow runs fn for a box in the background (hutchd creates and stops take seconds): the worker
// stays free, and the box is looked at again when it is done.
func (a *Agent) slow(key string, fn func() error) {
	a.mu.Lock()
	if a.busy[key] {
		a.mu.Unlock()
		return
	}
	a.busy[key] = true
	a.mu.Unlock()
	go func() {
		err := fn()
		a.mu.Lock()
		delete(a.busy, key)
		a.mu.Unlock()
		if err != nil {
			log.Printf("node %s: %s: %v", a.cfg.NodeName, key, err)
		}
		a.queue.Add(key)
	}()
}

func (a *Agent) isBusy(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.busy[key]
}

func (a *Agent) reconcileBox(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := strings.Cut(key, "/")
	b, err := a.getBox(key)
	if err != nil {
		return 0, err
	}
	pod, err := a.pods.Pods(ns).Get(v1.PodPrefix + name)
	if apierrors.IsNotFound(err) {
		pod, err = nil, nil
	}
	if err != nil {
		return 0, err
	}
	if b == nil {
		if pod != nil && pod.Spec.NodeName == a.cfg.NodeName && pod.DeletionTimestamp != nil {
			// The Box is gone (its garbage collector deletes the pod): nothing runs, so finish
			// the deletion as the kubelet would, which frees the node's resources.
			zero := int64(0)
			err := a.c.Core.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				err = nil
			}
			return 0, err
		}
		return 0, nil
	}
	if pod != nil && pod.Spec.NodeName != a.cfg.NodeName {
		pod = nil
	}
	mine := b.Status.NodeName == a.cfg.NodeName || pod != nil
	if !mine || a.isBusy(key) {
		return 0, nil
	}
	hname := HutchdName(ns, name)
	a.mu.Lock()
	healthy := a.healthy
	a.mu.Unlock()
	if !healthy {
		if b.Status.Phase != v1.PhaseLost && b.DeletionTimestamp == nil {
			return 0, a.status(ctx, b, map[string]any{"phase": v1.PhaseLost, "nodeName": a.cfg.NodeName,
				"message": "hutchd on node " + a.cfg.NodeName + " does not answer; the box comes back when it does"})
		}
		return 5 * time.Second, nil
	}
	if b.DeletionTimestamp != nil {
		a.slow(key, func() error {
			if err := a.hd.Remove(ctx, hname); err != nil && !hutchd.IsNotFound(err) {
				return err
			}
			return a.removeFinalizer(ctx, b)
		})
		return 0, nil
	}
	hb, err := a.hd.Get(ctx, hname)
	if err != nil && !hutchd.IsNotFound(err) {
		return 0, err
	}
	exists := err == nil
	if pod != nil && pod.DeletionTimestamp != nil {
		// Drained or evicted: stop the box (its disk stays here), then let the pod go.
		a.slow(key, func() error {
			if exists && hb.State == "running" {
				if _, err := a.hd.Stop(ctx, hname); err != nil {
					return err
				}
			}
			if err := a.status(ctx, b, map[string]any{"phase": v1.PhaseStopped, "nodeName": a.cfg.NodeName,
				"snapshot": map[string]any{"name": hname, "node": a.cfg.NodeName, "durable": false},
				"message":  "stopped: its pod was deleted (drain or eviction); it resumes on this node"}); err != nil {
				return err
			}
			zero := int64(0)
			return a.c.Core.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		return 0, nil
	}
	if !b.Running() {
		if exists && hb.State == "running" {
			a.status(ctx, b, map[string]any{"phase": v1.PhaseStopping, "nodeName": a.cfg.NodeName, "message": ""})
			a.slow(key, func() error {
				if _, err := a.hd.Stop(ctx, hname); err != nil {
					return err
				}
				return a.status(ctx, b, map[string]any{"phase": v1.PhaseStopped, "nodeName": a.cfg.NodeName,
					"snapshot": map[string]any{"name": hname, "node": a.cfg.NodeName, "durable": false}, "message": ""})
			})
			return 0, nil
		}
		if b.Status.Phase != v1.PhaseStopped {
			return 0, a.status(ctx, b, map[string]any{"phase": v1.PhaseStopped, "nodeName": a.cfg.NodeName,
				"snapshot": map[string]any{"name": hname, "node": a.cfg.NodeName, "durable": false}, "message": ""})
		}
		return 0, nil
	}
	if pod == nil {
		return 0, nil // running is asked for, but no pod is bound here (yet)
	}
	if exists && hb.State == "running" {
		if err := a.markPod(ctx, pod, true); err != nil {
			return 0, err
		}
		// Its disk lives here from now on: a new pod of this box must come back here.
		return 0, a.status(ctx, b, map[string]any{"phase": v1.PhaseRunning, "nodeName": a.cfg.NodeName, "boxID": hb.ID, "message": "",
			"snapshot": map[string]any{"name": hname, "node": a.cfg.NodeName, "durable": false}})
	}
	if exists && (hb.State == "creating" || hb.State == "stopping") {
		return 2 * time.Second, nil
	}
	a.status(ctx, b, map[string]any{"phase": v1.PhaseCreating, "nodeName": a.cfg.NodeName, "message": ""})
	a.slow(key, func() error {
		var err error
		switch {
		case exists: // stopped or failed: boot it from its own disk
			_, err = a.hd.Start(ctx, hname)
		case b.Spec.Source != nil && b.Spec.Source.Box != "":
			parent, perr := a.getBox(ns + "/" + b.Spec.Source.Box)
			if perr != nil || parent == nil || parent.Status.NodeName != a.cfg.NodeName || parent.Status.Phase != v1.PhaseRunning {
				err = fmt.Errorf("cannot fork %s here: the parent must run on this node (forks across nodes need snapshot mobility, docs/capacity.md)", b.Spec.Source.Box)
				break
			}
			_, err = a.hd.Fork(ctx, HutchdName(ns, parent.Name), hname)
		default:
			if err = a.ensureTemplate(ctx, b.Spec.Template); err == nil {
				_, err = a.hd.Create(ctx, hutchd.CreateRequest{Name: hname, Template: b.Spec.Template,
					CPUs: b.CPUs(), MemoryMiB: b.MemoryMiB(), DiskMiB: b.Spec.Resources.DiskMiB})
			}
		}
		if err != nil {
			return a.status(ctx, b, map[string]any{"phase": v1.PhaseFailed, "nodeName": a.cfg.NodeName, "message": err.Error()})
		}
		return nil
	})
	return 0, nil
}

func (a *Agent) removeFinalizer(ctx context.Context, b *v1.Box) error {
	var keep []string
	for _, f := range b.Finalizers {
		if f != v1.FinalizerNode {
			keep = append(keep, f)
		}
	}
	return a.c.PatchBox(ctx, b.Namespace, b.Name, map[string]any{"metadata": map[string]any{"finalizers": keep}})
}

// indexLocalTemplates makes the templates this hutchd holds servable to peers.
func (a *Agent) indexLocalTemplates(ctx context.Context) error {
	ts, err := a.hd.Templates(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Dir == "" {
			continue
		}
		m, err := chunks.Build(t.Dir)
		if err != nil {
			return err
		}
		d := a.store.Add(t.Dir, m)
		log.Printf("node %s: template %s: %s (%d files, %d bytes)", a.cfg.NodeName, t.Name, d[:12], len(m.Files), m.Bytes())
	}
	return nil
}

func (a *Agent) getTemplate(name string) (*v1.BoxTemplate, error) {
	obj, ok, err := a.tmpls.GetStore().GetByKey(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("BoxTemplate %s does not exist; create it (kubectl apply -f a BoxTemplate) first", name)
	}
	var t v1.BoxTemplate
	return &t, v1.FromUnstructured(obj.(*unstructured.Unstructured), &t)
}

// ensureTemplate makes template name available to this hutchd: present already; fetched from
// a node that holds it (by digest, verified); or built here when this is its build node.
func (a *Agent) ensureTemplate(ctx context.Context, name string) error {
	a.tmplMu.Lock()
	defer a.tmplMu.Unlock()
	ts, err := a.hd.Templates(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Name == name {
			return nil
		}
	}
	bt, err := a.getTemplate(name)
	if err != nil {
		return err
	}
	if bt.Status.Digest == "" {
		if bt.Spec.BuildOn != "" && bt.Spec.BuildOn != a.cfg.NodeName {
			return fmt.Errorf("template %s is not built yet (node %s builds it); try again when its status has a digest", name, bt.Spec.BuildOn)
		}
		return a.buildTemplate(ctx, bt)
	}
	var peers []string
	for _, n := range bt.Status.Nodes {
		if n.State != "Ready" || n.Name == a.cfg.NodeName {
			continue
		}
		node, err := a.c.Core.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && node.Annotations[v1.AnnotationEndpoint] != "" {
			peers = append(peers, node.Annotations[v1.AnnotationEndpoint])
		}
	}
	if len(peers) == 0 {
		return fmt.Errorf("no node holds template %s (digest %s) to fetch it from", name, bt.Status.Digest[:12])
	}
	t0 := time.Now()
	f := &chunks.Fetcher{Client: a.peers, Header: http.Header{"Authorization": {"Bearer " + a.cfg.Token}}}
	images := filepath.Join(a.cfg.ImageCache, "images")
	os.MkdirAll(images, 0o755)
	m, st, err := f.Fetch(ctx, peers, bt.Status.Digest, images, a.store)
	if err != nil {
		a.templateNode(ctx, name, "Failed", err.Error())
		return fmt.Errorf("cannot fetch template %s: %w", name, err)
	}
	log.Printf("node %s: template %s fetched and verified in %.1f s: %d chunks, %d fetched (%d bytes), %d local, %d holes",
		a.cfg.NodeName, name, time.Since(t0).Seconds(), st.Chunks, st.Fetched, st.BytesFetched, st.Local, st.Zero)
	t, err := a.hd.BuildTemplate(ctx, name)
	if err != nil {
		return err
	}
	if filepath.Base(t.Dir) != m.Name {
		return fmt.Errorf("hutchd made template %s from %s, not from the fetched image %s (its builder key differs: another hutch version?)", name, t.Dir, m.Name)
	}
	msg := fmt.Sprintf("fetched %d of %d chunks (%d bytes) in %.1f s, %d local, %d holes; verified", st.Fetched, st.Chunks, st.BytesFetched, time.Since(t0).Seconds(), st.Local, st.Zero)
	return a.templateNode(ctx, name, "Ready", msg)
}

func (a *Agent) buildTemplate(ctx context.Context, bt *v1.BoxTemplate) error {
	a.templateNode(ctx, bt.Name, "Building", "")
	t0 := time.Now()
	t, err := a.hd.BuildTemplate(ctx, bt.Name)
	if err != nil {
		a.templateNode(ctx, bt.Name, "Failed", err.Error())
		return err
	}
	m, err := chunks.Build(t.Dir)
	if err != nil {
		return err
	}
	d := a.store.Add(t.Dir, m)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.c.Dynamic.Resource(v1.BoxTemplateGVR).Get(ctx, bt.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		unstructured.SetNestedField(u.Object, d, "status", "digest")
		unstructured.SetNestedField(u.Object, m.Bytes(), "status", "sizeBytes")
		_, err = a.c.Dynamic.Resource(v1.BoxTemplateGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return a.templateNode(ctx, bt.Name, "Ready", fmt.Sprintf("built here in %.1f s", time.Since(t0).Seconds()))
}

// templateNode records this node's state in BoxTemplate.status.nodes and, once Ready, labels
// the node so that boxes of the template prefer it.
func (a *Agent) templateNode(ctx context.Context, name, state, msg string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := a.c.Dynamic.Resource(v1.BoxTemplateGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var t v1.BoxTemplate
		if err := v1.FromUnstructured(u, &t); err != nil {
			return err
		}
		var nodes []any
		for _, n := range t.Status.Nodes {
			if n.Name != a.cfg.NodeName {
				nodes = append(nodes, map[string]any{"name": n.Name, "state": n.State, "message": n.Message})
			}
		}
		nodes = append(nodes, map[string]any{"name": a.cfg.NodeName, "state": state, "message": msg})
		unstructured.SetNestedSlice(u.Object, nodes, "status", "nodes")
		_, err = a.c.Dynamic.Resource(v1.BoxTemplateGVR).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil || state != "Ready" {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{v1.LabelTemplatePrefix + name: "ready"}}})
	_, err = a.c.Core.CoreV1().Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// reconcileTemplate builds a template on its build node as soon as it is declared.
func (a *Agent) reconcileTemplate(ctx context.Context, name string) (time.Duration, error) {
	bt, err := a.getTemplate(name)
	if err != nil {
		return 0, nil
	}
	if bt.Spec.BuildOn != a.cfg.NodeName || bt.Status.Digest != "" {
		return 0, nil
	}
	a.slow("template/"+name, func() error { return a.ensureTemplate(ctx, name) })
	return 0, nil
}

// EndpointURL checks an --advertise value.
func EndpointURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--advertise must be an http(s)://HOST:PORT URL, not %q", s)
	}
	return nil
}
