// Package controller is hutch's Box controller: for every Box asked to run it keeps one box pod
// (internal/boxpod), which the stock kube-scheduler binds to a node; it follows the pod and
// its node into the Box's status, deletes the pod of a stopped box once its node agent has
// stopped it, and reports boxes on unreachable nodes Lost. It never picks a node itself.
package controller

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1 "hutch.dev/k8s/api/v1alpha1"
	"hutch.dev/k8s/internal/boxpod"
	"hutch.dev/k8s/internal/kube"
)

type Controller struct {
	c       *kube.Clients
	opts    boxpod.Options
	boxes   cache.SharedIndexInformer
	pods    listerscorev1.PodLister
	nodes   listerscorev1.NodeLister
	queue   workqueue.TypedRateLimitingInterface[string]
	synced  []cache.InformerSynced
	start   func(<-chan struct{})
	Created atomic.Int64 // box pods created
}

const byNode = "byNode"

func New(c *kube.Clients, opts boxpod.Options) (*Controller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, 10*time.Minute)
	boxes := dyn.ForResource(v1.BoxGVR).Informer()
	if err := boxes.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		b, err := v1.BoxFrom(obj)
		if err != nil || b.Status.NodeName == "" {
			return nil, nil
		}
		return []string{b.Status.NodeName}, nil
	}}); err != nil {
		return nil, err
	}
	core := informers.NewSharedInformerFactoryWithOptions(c.Core, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {}))
	podInf := informers.NewSharedInformerFactoryWithOptions(c.Core, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1.LabelBox }))
	pods := podInf.Core().V1().Pods()
	nodes := core.Core().V1().Nodes()
	ctl := &Controller{
		c: c, opts: opts, boxes: boxes, pods: pods.Lister(), nodes: nodes.Lister(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueueBox := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			ctl.queue.Add(key)
		}
	}
	boxes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueBox, UpdateFunc: func(_, n any) { enqueueBox(n) }, DeleteFunc: enqueueBox})
	enqueueOwner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[v1.LabelBox] != "" {
			ctl.queue.Add(p.Namespace + "/" + p.Labels[v1.LabelBox])
		}
	}
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueOwner, UpdateFunc: func(_, n any) { enqueueOwner(n) }, DeleteFunc: enqueueOwner})
	enqueueNode := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		objs, _ := boxes.GetIndexer().ByIndex(byNode, n.Name)
		for _, o := range objs {
			enqueueBox(o)
		}
	}
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueNode, UpdateFunc: func(o, n any) {
		if nodeReady(o.(*corev1.Node)) != nodeReady(n.(*corev1.Node)) {
			enqueueNode(n)
		}
	}, DeleteFunc: enqueueNode})
	ctl.synced = []cache.InformerSynced{boxes.HasSynced, pods.Informer().HasSynced, nodes.Informer().HasSynced}
	ctl.start = func(stop <-chan struct{}) { dyn.Start(stop); core.Start(stop); podInf.Start(stop) }
	return ctl, nil
}

// Run serves until ctx ends, with workers reconciling in parallel.
func (ctl *Controller) Run(ctx context.Context, workers int) error {
	defer ctl.queue.ShutDown()
	ctl.start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ctl.synced...) {
		return fmt.Errorf("the informers' caches did not sync")
	}
	log.Printf("controller: caches synced, %d workers", workers)
	for i := 0; i < workers; i++ {
		go func() {
			for ctl.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

func (ctl *Controller) next(ctx context.Context) bool {
	key, quit := ctl.queue.Get()
	if quit {
		return false
	}
	defer ctl.queue.Done(key)
	requeue, err := ctl.reconcile(ctx, key)
	switch {
	case err != nil:
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			log.Printf("controller: %s: %v", key, err)
		}
		ctl.queue.AddRateLimited(key)
	case requeue > 0:
		ctl.queue.Forget(key)
		ctl.queue.AddAfter(key, requeue)
	default:
		ctl.queue.Forget(key)
	}
	return true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (ctl *Controller) getBox(key string) (*v1.Box, error) {
	obj, exists, err := ctl.boxes.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return nil, err
	}
	return v1.BoxFrom(obj)
}

func hasFinalizer(b *v1.Box) bool {
	for _, f := range b.Finalizers {
		if f == v1.FinalizerNode {
			return true
		}
	}
	return false
}

func (ctl *Controller) setStatus(ctx context.Context, b *v1.Box, fields map[string]any) error {
	changed := false
	for k, v := range fields {
		switch k {
		case "phase":
			changed = changed || b.Status.Phase != v
		case "nodeName":
			changed = changed || b.Status.NodeName != v
		case "podName":
			changed = changed || b.Status.PodName != v
		case "message":
			changed = changed || b.Status.Message != v
		default:
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return ctl.c.PatchBoxStatus(ctx, b.Namespace, b.Name, fields)
}

// reconcile brings one Box's pod in line with its spec; it returns a delay after which to look
// again when it waits for something no event will announce.
func (ctl *Controller) reconcile(ctx context.Context, key string) (time.Duration, error) {
	b, err := ctl.getBox(key)
	if err != nil || b == nil {
		return 0, err
	}
	if b.DeletionTimestamp != nil {
		// The node agent removes the box from its hutchd and then the finalizer; a box that
		// never reached a node, or whose node is gone for good, has nobody else to do it.
		if hasFinalizer(b) {
			if _, err := ctl.nodes.Get(b.Status.NodeName); b.Status.NodeName == "" || apierrors.IsNotFound(err) {
				return 0, ctl.removeFinalizer(ctx, b)
			}
		}
		return 0, nil
	}
	if !hasFinalizer(b) {
		fin := append(append([]string{}, b.Finalizers...), v1.FinalizerNode)
		return 0, ctl.c.PatchBox(ctx, b.Namespace, b.Name, map[string]any{"metadata": map[string]any{"finalizers": fin, "resourceVersion": b.ResourceVersion}})
	}
	pod, err := ctl.pods.Pods(b.Namespace).Get(boxpod.Name(b))
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if apierrors.IsNotFound(err) {
		pod = nil
	}
	if !b.Running() {
		return ctl.reconcileStopped(ctx, b, pod)
	}
	if pod == nil {
		if b.Status.Phase == v1.PhaseStopping {
			return 0, nil // its node agent is still stopping the previous run
		}
		parentNode := ""
		if parent := b.Parent(); parent != "" {
			pb, err := ctl.getBox(b.Namespace + "/" + parent)
			if err != nil {
				return 0, err
			}
			if pb == nil {
				return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhaseFailed, "message": fmt.Sprintf("Box %s to fork or stay near does not exist", parent)})
			}
			if pb.Status.NodeName == "" && b.Spec.Source != nil && b.Spec.Source.Box != "" {
				return 2 * time.Second, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhasePending, "message": "waiting for the parent box " + parent + " to be placed"})
			}
			parentNode = pb.Status.NodeName
		}
		p := boxpod.Build(b, parentNode, ctl.opts)
		if _, err := ctl.c.Core.CoreV1().Pods(b.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			if apierrors.IsForbidden(err) { // a ResourceQuota said no: say so on the Box
				return 30 * time.Second, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhasePending, "message": err.Error()})
			}
			return 0, err
		}
		ctl.Created.Add(1)
		return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhasePending, "podName": p.Name, "message": ""})
	}
	if pod.Spec.NodeName == "" {
		msg := ""
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Reason + ": " + c.Message
			}
		}
		return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhasePending, "podName": pod.Name, "message": msg})
	}
	node, err := ctl.nodes.Get(pod.Spec.NodeName)
	if apierrors.IsNotFound(err) || (err == nil && !nodeReady(node)) {
		return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhaseLost, "nodeName": pod.Spec.NodeName,
			"message": fmt.Sprintf("Node %s is not ready; the box comes back with it (or from a durable snapshot)", pod.Spec.NodeName)})
	}
	if err != nil {
		return 0, err
	}
	if pod.DeletionTimestamp != nil {
		return 0, nil // being drained or evicted: the node agent stops it, then the pod goes
	}
	switch b.Status.Phase {
	case "", v1.PhasePending:
		if b.Labels[v1.LabelNodeName] != pod.Spec.NodeName {
			// The node agent watches Boxes by this label: set it before the status says Scheduled.
			if err := ctl.c.PatchBox(ctx, b.Namespace, b.Name, map[string]any{"metadata": map[string]any{"labels": map[string]string{v1.LabelNodeName: pod.Spec.NodeName}}}); err != nil {
				return 0, err
			}
		}
		return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhaseScheduled, "nodeName": pod.Spec.NodeName, "podName": pod.Name, "message": ""})
	case v1.PhaseLost:
		if strings.HasPrefix(b.Status.Message, "Node ") && b.Status.NodeName == pod.Spec.NodeName && nodeReady(node) && !hutchdDown(node) {
			// The node is back: its agent takes the box up again.
			return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhaseScheduled, "message": "node " + node.Name + " is back"})
		}
	}
	return 0, nil
}

func hutchdDown(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1.TaintHutchdDown {
			return true
		}
	}
	return false
}

func (ctl *Controller) reconcileStopped(ctx context.Context, b *v1.Box, pod *corev1.Pod) (time.Duration, error) {
	if pod == nil {
		if b.Status.Phase != v1.PhaseStopped && b.Status.Phase != v1.PhaseStopping {
			return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhaseStopped, "podName": "", "message": ""})
		}
		return 0, nil
	}
	if pod.Spec.NodeName == "" || b.Status.Phase == v1.PhaseStopped {
		// Never placed, or its node agent has stopped it and recorded where its disk is.
		zero := int64(0)
		err := ctl.c.Core.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
		return 0, ctl.setStatus(ctx, b, map[string]any{"phase": v1.PhaseStopped, "podName": ""})
	}
	return 0, nil // the node agent stops the box, then sets Stopped
}

func (ctl *Controller) removeFinalizer(ctx context.Context, b *v1.Box) error {
	var keep []string
	for _, f := range b.Finalizers {
		if f != v1.FinalizerNode {
			keep = append(keep, f)
		}
	}
	return ctl.c.PatchBox(ctx, b.Namespace, b.Name, map[string]any{"metadata": map[string]any{"finalizers": keep, "resourceVersion": b.ResourceVersion}})
}

// PodsOnNode lists the box pods bound to a node (used by tests and the simulation).
func (ctl *Controller) PodsOnNode(node string) ([]*corev1.Pod, error) {
	all, err := ctl.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range all {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}
