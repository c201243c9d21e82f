// hutch-sim: placement at scale against a real kube-apiserver and kube-scheduler, with the real
// hutch-controller running beside it (docs/capacity.md, "Placement at scale"). It registers
// simulated nodes (Node objects with capacity, no kubelet), creates Boxes through the API in
// waves (parents, forks of random parents, then boxes until the cluster is full), waits for the
// scheduler's bindings, and prints what it measured as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	v1 "hutch.dev/k8s/api/v1alpha1"
	"hutch.dev/k8s/internal/kube"
)

type size struct {
	CPUs, MemoryMiB int64
}

type cfg struct {
	nodes, boxes, forks, fillMax int
	nodeCPUs, nodeMemMiB         int64
	ns, prefix                   string
	seed                         int64
	timeout                      time.Duration
	sizes                        []size
}

type wave struct {
	Name          string  `json:"name"`
	Requested     int     `json:"requested"`
	Bound         int     `json:"bound"`
	Unschedulable int     `json:"unschedulable"`
	Seconds       float64 `json:"seconds"`
	BindP50Ms     int64   `json:"bind_p50_ms"`
	BindP99Ms     int64   `json:"bind_p99_ms"`
	FirstReason   string  `json:"first_unschedulable_reason,omitempty"`
}

type spread struct {
	Min, Max       int
	Mean, Stddev   float64
	CV             float64 `json:"cv"`
	CPUUtilMinPct  float64 `json:"cpu_util_min_pct"`
	CPUUtilMaxPct  float64 `json:"cpu_util_max_pct"`
	CPUUtilMeanPct float64 `json:"cpu_util_mean_pct"`
}

type result struct {
	Nodes          int     `json:"nodes"`
	NodeCPUs       int64   `json:"node_cpus"`
	NodeMemoryMiB  int64   `json:"node_memory_mib"`
	Waves          []wave  `json:"waves"`
	SpreadAfter    spread  `json:"spread_after_parents"`
	SpreadFull     spread  `json:"spread_when_full"`
	Forks          int     `json:"forks"`
	ForksBound     int     `json:"forks_bound"`
	ForksOnParent  int     `json:"forks_on_parent_node"`
	ForkLocality   float64 `json:"fork_locality_pct"`
	CapacityBoxes  int     `json:"boxes_bound_total"`
	CPUAllocPct    float64 `json:"cpu_requested_pct_of_allocatable_when_full"`
	MemAllocPct    float64 `json:"memory_requested_pct_of_allocatable_when_full"`
	SchedulerNotes string  `json:"scheduler_config,omitempty"`
}

func main() {
	var c cfg
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG)")
	flag.IntVar(&c.nodes, "nodes", 200, "Simulated nodes to register")
	flag.IntVar(&c.boxes, "boxes", 2000, "Boxes of the first wave (from a template)")
	flag.IntVar(&c.forks, "forks", 500, "Forks of random first-wave boxes")
	flag.IntVar(&c.fillMax, "fill", 4000, "Most boxes to add until the cluster is full (0: skip)")
	flag.Int64Var(&c.nodeCPUs, "node-cpus", 32, "CPUs per simulated node")
	flag.Int64Var(&c.nodeMemMiB, "node-memory-mib", 128*1024, "Memory per simulated node (MiB)")
	flag.StringVar(&c.ns, "namespace", "sim", "Namespace of the Boxes")
	flag.StringVar(&c.prefix, "node-prefix", "sim-", "Name prefix of the simulated nodes")
	flag.Int64Var(&c.seed, "seed", 1, "Random seed (sizes, fork parents)")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "Give up after this long")
	note := flag.String("note", "", "A note on the scheduler configuration, copied into the result")
	flag.Parse()
	c.sizes = []size{{1, 512}, {1, 512}, {2, 1024}, {2, 2048}, {4, 4096}}
	if c.nodes < 1 || c.boxes < 1 {
		log.Fatal("hutch-sim: --nodes and --boxes must be at least 1")
	}
	cl, err := kube.Connect(*kubeconfig, 400, "hutch-sim", true)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res, err := run(ctx, cl, c)
	if err != nil {
		log.Fatalf("hutch-sim: %v", err)
	}
	res.SchedulerNotes = *note
	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(out))
}

func parallel(n, workers int, fn func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

func registerNodes(ctx context.Context, cl *kube.Clients, c cfg) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(c.nodeCPUs, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(c.nodeMemMiB<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
	}
	return parallel(c.nodes, 16, func(i int) error {
		name := fmt.Sprintf("%s%04d", c.prefix, i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, v1.LabelNode: "true", "hutch.dev/simulated": "true"}}}
		created, err := cl.Core.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = cl.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("cannot register node %s: %w", name, err)
		}
		now := metav1.Now()
		created.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "HutchSimulated",
				Message: "simulated by hutch-sim (no kubelet)", LastHeartbeatTime: now, LastTransitionTime: now}}}
		updated, err := cl.Core.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		// The apiserver taints every new Node not-ready (admission TaintNodesByCondition); the
		// node lifecycle controller lifts it once the node reports Ready. That controller does
		// not run here (nothing would renew these nodes' Leases), so lift it as it would.
		var keep []corev1.Taint
		for _, t := range updated.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(updated.Spec.Taints) {
			return nil
		}
		updated.Spec.Taints = keep
		_, err = cl.Core.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{})
		return err
	})
}

func boxObject(ns, name string, s size, parent string) *unstructured.Unstructured {
	spec := map[string]any{"template": "base", "resources": map[string]any{"cpus": s.CPUs, "memoryMiB": s.MemoryMiB}}
	if parent != "" {
		spec = map[string]any{"source": map[string]any{"box": parent}, "resources": map[string]any{"cpus": s.CPUs, "memoryMiB": s.MemoryMiB}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1.Group + "/" + v1.Version, "kind": "Box",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
}

type placed struct {
	node   string
	bindMs int64
	unsch  string
}

// tracker follows box pods through an informer (a watch, not polling lists): when each was
// first seen bound, or reported unschedulable.
type tracker struct {
	mu      sync.Mutex
	bound   map[string]time.Time
	node    map[string]string
	unsched map[string]string
}

func newTracker(ctx context.Context, cl *kube.Clients, ns string) (*tracker, error) {
	t := &tracker{bound: map[string]time.Time{}, node: map[string]string{}, unsched: map[string]string{}}
	f := informers.NewSharedInformerFactoryWithOptions(cl.Core, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1.LabelBox }))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		box := p.Labels[v1.LabelBox]
		t.mu.Lock()
		defer t.mu.Unlock()
		if p.Spec.NodeName != "" {
			if _, done := t.bound[box]; !done {
				t.bound[box], t.node[box] = time.Now(), p.Spec.NodeName
			}
			return
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				t.unsched[box] = c.Message
			}
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }})
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the pod informer did not sync")
	}
	return t, nil
}

// createWave creates boxes and waits until each one's pod is bound or reported unschedulable.
func createWave(ctx context.Context, cl *kube.Clients, tr *tracker, c cfg, name string, names []string, sizes []size, parents []string) (wave, map[string]placed, error) {
	w := wave{Name: name, Requested: len(names)}
	t0 := time.Now()
	created := make(map[string]time.Time, len(names))
	var mu sync.Mutex
	err := parallel(len(names), 16, func(i int) error {
		mu.Lock()
		created[names[i]] = time.Now()
		mu.Unlock()
		_, err := cl.Dynamic.Resource(v1.BoxGVR).Namespace(c.ns).Create(ctx, boxObject(c.ns, names[i], sizes[i], parents[i]), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create Box %s: %w", names[i], err)
		}
		return nil
	})
	if err != nil {
		return w, nil, err
	}
	out := map[string]placed{}
	var binds []int64
	for {
		tr.mu.Lock()
		for _, box := range names {
			if _, done := out[box]; done {
				continue
			}
			if at, ok := tr.bound[box]; ok {
				ms := at.Sub(created[box]).Milliseconds()
				out[box] = placed{node: tr.node[box], bindMs: ms}
				binds = append(binds, ms)
				w.Bound++
			} else if msg, ok := tr.unsched[box]; ok {
				out[box] = placed{unsch: msg}
				w.Unschedulable++
				if w.FirstReason == "" {
					w.FirstReason = msg
				}
			}
		}
		tr.mu.Unlock()
		if len(out) == len(names) {
			break
		}
		if ctx.Err() != nil {
			return w, out, fmt.Errorf("wave %s: %d of %d boxes settled before the timeout", name, len(out), len(names))
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.Seconds = math.Round(time.Since(t0).Seconds()*10) / 10
	sort.Slice(binds, func(i, j int) bool { return binds[i] < binds[j] })
	if len(binds) > 0 {
		w.BindP50Ms, w.BindP99Ms = binds[len(binds)/2], binds[len(binds)*99/100]
	}
	return w, out, nil
}

func spreadOf(c cfg, where map[string]placed, sizeOf map[string]size) spread {
	count := map[string]int{}
	cpu := map[string]int64{}
	for i := 0; i < c.nodes; i++ {
		count[fmt.Sprintf("%s%04d", c.prefix, i)] = 0
	}
	for box, p := range where {
		if p.node != "" {
			count[p.node]++
			cpu[p.node] += sizeOf[box].CPUs
		}
	}
	s := spread{Min: math.MaxInt}
	var sum, sq float64
	var umin, umax, usum float64 = math.MaxFloat64, 0, 0
	for n, k := range count {
		s.Min, s.Max = min(s.Min, k), max(s.Max, k)
		sum += float64(k)
		sq += float64(k) * float64(k)
		u := 100 * float64(cpu[n]) / float64(c.nodeCPUs)
		umin, umax, usum = math.Min(umin, u), math.Max(umax, u), usum+u
	}
	n := float64(len(count))
	s.Mean = sum / n
	s.Stddev = math.Sqrt(math.Max(0, sq/n-s.Mean*s.Mean))
	if s.Mean > 0 {
		s.CV = math.Round(1000*s.Stddev/s.Mean) / 1000
	}
	s.Mean, s.Stddev = math.Round(s.Mean*100)/100, math.Round(s.Stddev*100)/100
	s.CPUUtilMinPct, s.CPUUtilMaxPct, s.CPUUtilMeanPct = math.Round(umin*10)/10, math.Round(umax*10)/10, math.Round(usum/n*10)/10
	return s
}

func run(ctx context.Context, cl *kube.Clients, c cfg) (*result, error) {
	rng := rand.New(rand.NewSource(c.seed))
	if _, err := cl.Core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// The simulation runs without the controller-manager (simulated nodes send no heartbeats),
	// so nothing makes the namespace's default ServiceAccount, which the apiserver's
	// ServiceAccount admission requires of every pod: make it, as that controller would.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: c.ns}}
	if _, err := cl.Core.CoreV1().ServiceAccounts(c.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	tr, err := newTracker(ctx, cl, c.ns)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := registerNodes(ctx, cl, c); err != nil {
		return nil, err
	}
	log.Printf("hutch-sim: %d nodes registered in %.1f s", c.nodes, time.Since(t0).Seconds())
	res := &result{Nodes: c.nodes, NodeCPUs: c.nodeCPUs, NodeMemoryMiB: c.nodeMemMiB}
	where := map[string]placed{}
	sizeOf := map[string]size{}
	// Wave 1: boxes from a template.
	names, sizes, parents := make([]string, c.boxes), make([]size, c.boxes), make([]string, c.boxes)
	for i := range names {
		names[i], sizes[i] = fmt.Sprintf("box-%05d", i), c.sizes[rng.Intn(len(c.sizes))]
		sizeOf[names[i]] = sizes[i]
	}
	w, got, err := createWave(ctx, cl, tr, c, "boxes", names, sizes, parents)
	if err != nil {
		return nil, err
	}
	res.Waves = append(res.Waves, w)
	for k, v := range got {
		where[k] = v
	}
	log.Printf("hutch-sim: wave boxes: %+v", w)
	if w.Bound == 0 {
		// Nothing placed says nothing about placement: the cluster itself is broken.
		return nil, fmt.Errorf("the scheduler bound none of the %d boxes of the first wave: %s", w.Requested, w.FirstReason)
	}
	res.SpreadAfter = spreadOf(c, where, sizeOf)
	// Wave 2: forks of random bound parents, same size as their parent.
	var bound []string
	for _, n := range names {
		if where[n].node != "" {
			bound = append(bound, n)
		}
	}
	if c.forks > 0 && len(bound) > 0 {
		fn, fs, fp := make([]string, c.forks), make([]size, c.forks), make([]string, c.forks)
		for i := range fn {
			fp[i] = bound[rng.Intn(len(bound))]
			fn[i], fs[i] = fmt.Sprintf("fork-%05d", i), sizeOf[fp[i]]
			sizeOf[fn[i]] = fs[i]
		}
		w, got, err := createWave(ctx, cl, tr, c, "forks", fn, fs, fp)
		if err != nil {
			return nil, err
		}
		res.Waves = append(res.Waves, w)
		res.Forks = c.forks
		for i, n := range fn {
			where[n] = got[n]
			if got[n].node != "" {
				res.ForksBound++
				if got[n].node == where[fp[i]].node {
					res.ForksOnParent++
				}
			}
		}
		if res.ForksBound > 0 {
			res.ForkLocality = math.Round(1000*float64(res.ForksOnParent)/float64(res.ForksBound)) / 10
		}
		log.Printf("hutch-sim: wave forks: %+v, %d of %d on their parent's node", w, res.ForksOnParent, res.ForksBound)
	}
	// Wave 3: fill in batches until a whole batch is unschedulable.
	for added := 0; c.fillMax > 0 && added < c.fillMax; {
		batch := min(250, c.fillMax-added)
		fn, fs, fp := make([]string, batch), make([]size, batch), make([]string, batch)
		for i := range fn {
			fn[i], fs[i] = fmt.Sprintf("fill-%05d", added+i), c.sizes[rng.Intn(len(c.sizes))]
			sizeOf[fn[i]] = fs[i]
		}
		added += batch
		w, got, err := createWave(ctx, cl, tr, c, fmt.Sprintf("fill-%d", added/250), fn, fs, fp)
		if err != nil {
			return nil, err
		}
		res.Waves = append(res.Waves, w)
		for k, v := range got {
			where[k] = v
		}
		log.Printf("hutch-sim: wave %s: %+v", w.Name, w)
		if w.Bound == 0 {
			break
		}
	}
	res.SpreadFull = spreadOf(c, where, sizeOf)
	var cpu, mem int64
	for box, p := range where {
		if p.node != "" {
			res.CapacityBoxes++
			cpu += sizeOf[box].CPUs
			mem += sizeOf[box].MemoryMiB + 64
		}
	}
	res.CPUAllocPct = math.Round(1000*float64(cpu)/float64(c.nodeCPUs*int64(c.nodes))) / 10
	res.MemAllocPct = math.Round(1000*float64(mem)/float64(c.nodeMemMiB*int64(c.nodes))) / 10
	return res, nil
}
