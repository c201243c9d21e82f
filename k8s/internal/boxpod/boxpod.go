// Package boxpod builds the pod that holds a running box's CPU and memory on its node, the way
// KubeVirt's virt-launcher pod anchors a VM: the stock kube-scheduler places the pod, and the
// node agent on the node it was bound to makes the box real. See docs/capacity.md.
package boxpod

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "hutch.dev/k8s/api/v1alpha1"
)

// Options are the cluster-wide sizing and placement policy.
type Options struct {
	// Image of the launcher container (the pod's only container; kubelet-less test beds never pull it).
	Image string
	// VMMOverheadMiB is added to the guest's memory: QEMU's own RSS (TCG code cache included).
	VMMOverheadMiB int64
	// MemoryRequestPercent of (guest + overhead) is requested; the limit is always the whole.
	// Below 100 overcommits memory on the strength of page sharing between restored boxes.
	MemoryRequestPercent int64
	// CPURequestMilli per vCPU (1000 = no overcommit; an idle TCG guest uses ~3 % of a core).
	CPURequestMilli int64
	// ForkAffinity: "required" keeps a fork on its parent's node (it fails to schedule when that
	// node is full); "preferred" lets the scheduler go elsewhere (needs snapshot mobility).
	ForkAffinity string
	// ForkAffinityWeight is the preferred weight (1-100) toward the parent's node.
	ForkAffinityWeight int32
	// TemplateAffinityWeight is the preferred weight toward nodes that hold the template.
	TemplateAffinityWeight int32
	// LostAfterSeconds: how long a box pod tolerates an unreachable or not-ready node before the
	// taint manager evicts it (the Box is then reported Lost or resumed elsewhere).
	LostAfterSeconds int64
}

func DefaultOptions() Options {
	return Options{
		Image: "hutch-launcher", VMMOverheadMiB: 64, MemoryRequestPercent: 100, CPURequestMilli: 1000,
		ForkAffinity: "preferred", ForkAffinityWeight: 100, TemplateAffinityWeight: 10, LostAfterSeconds: 30,
	}
}

// Validate says what is wrong with o, as a sentence that names the flag's meaning.
func (o Options) Validate() error {
	switch {
	case o.MemoryRequestPercent < 1 || o.MemoryRequestPercent > 100:
		return fmt.Errorf("the memory request must be 1-100 %% of the limit, not %d", o.MemoryRequestPercent)
	case o.CPURequestMilli < 1 || o.CPURequestMilli > 1000:
		return fmt.Errorf("the CPU request per vCPU must be 1-1000 millicores, not %d", o.CPURequestMilli)
	case o.ForkAffinity != "required" && o.ForkAffinity != "preferred":
		return fmt.Errorf("fork affinity must be 'required' or 'preferred', not %q", o.ForkAffinity)
	case o.ForkAffinityWeight < 1 || o.ForkAffinityWeight > 100, o.TemplateAffinityWeight < 1 || o.TemplateAffinityWeight > 100:
		return fmt.Errorf("affinity weights must be 1-100")
	}
	return nil
}

// Name of the box pod of a Box.
func Name(box *v1.Box) string { return v1.PodPrefix + box.Name }

// Build returns the box pod for box. parentNode is the node of the box it forks or should stay
// near ("" if none or not placed yet).
func Build(box *v1.Box, parentNode string, o Options) *corev1.Pod {
	memLimit := box.MemoryMiB() + o.VMMOverheadMiB
	memRequest := memLimit * o.MemoryRequestPercent / 100
	cpuRequest := box.CPUs() * o.CPURequestMilli
	controller := true
	labels := map[string]string{v1.LabelBox: box.Name}
	if box.Spec.Template != "" {
		labels[v1.LabelTemplate] = box.Spec.Template
	}
	grace, noToken := int64(60), false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(box), Namespace: box.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.Group + "/" + v1.Version, Kind: "Box", Name: box.Name, UID: box.UID,
				Controller: &controller, BlockOwnerDeletion: &controller,
			}},
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{v1.LabelNode: "true"},
			Containers: []corev1.Container{{
				Name: "launcher", Image: o.Image,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    *resource.NewMilliQuantity(cpuRequest, resource.DecimalSI),
						corev1.ResourceMemory: *resource.NewQuantity(memRequest<<20, resource.BinarySI),
					},
					Limits: corev1.ResourceList{
						corev1.ResourceCPU:    *resource.NewQuantity(box.CPUs(), resource.DecimalSI),
						corev1.ResourceMemory: *resource.NewQuantity(memLimit<<20, resource.BinarySI),
					},
				},
			}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			// The launcher talks to its node's hutchd, never to the apiserver: no token in it.
			AutomountServiceAccountToken: &noToken,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &o.LostAfterSeconds},
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &o.LostAfterSeconds},
			},
		},
	}
	if box.Spec.Placement != nil {
		for k, v := range box.Spec.Placement.NodeSelector {
			pod.Spec.NodeSelector[k] = v
		}
	}
	var required []corev1.NodeSelectorRequirement
	var preferred []corev1.PreferredSchedulingTerm
	hostIs := func(node string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	}
	// A stopped box's disk (and memory) live on the node where it stopped: resume there until a
	// durable copy exists, then only prefer it.
	if s := box.Status.Snapshot; s != nil && s.Node != "" {
		if s.Durable {
			preferred = append(preferred, corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{hostIs(s.Node)}}})
		} else {
			required = append(required, hostIs(s.Node))
		}
	} else if parentNode != "" {
		if o.ForkAffinity == "required" && box.Spec.Source != nil && box.Spec.Source.Box != "" {
			required = append(required, hostIs(parentNode))
		} else {
			preferred = append(preferred, corev1.PreferredSchedulingTerm{Weight: o.ForkAffinityWeight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{hostIs(parentNode)}}})
		}
	}
	if box.Spec.Template != "" {
		preferred = append(preferred, corev1.PreferredSchedulingTerm{Weight: o.TemplateAffinityWeight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: v1.LabelTemplatePrefix + box.Spec.Template, Operator: corev1.NodeSelectorOpIn, Values: []string{"ready"}}}}})
	}
	if len(required) > 0 || len(preferred) > 0 {
		na := &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}
		if len(required) > 0 {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: required}}}
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: na}
	}
	return pod
}
