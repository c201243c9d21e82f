// Package v1alpha1 holds the Go shapes of hutch's custom resources (k8s/crds/*.yaml) and the
// names the controller, the node agent, the gateway and the simulation share.
package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	Group   = "hutch.dev"
	Version = "v1alpha1"

	// LabelBox names the Box a box pod belongs to; LabelNode marks nodes that run hutchd.
	LabelBox      = "hutch.dev/box"
	LabelTemplate = "hutch.dev/template"
	LabelNode     = "hutch.dev/node"
	// LabelNodeName on a Box names the node its pod was bound to: node agents watch only
	// their own Boxes (as KubeVirt's virt-handler selects its VMIs by node label).
	LabelNodeName = "hutch.dev/node-name"
	// LabelTemplatePrefix + name = "ready" on a node that holds the template (locality hint).
	LabelTemplatePrefix = "tmpl.hutch.dev/"
	// AnnotationEndpoint is where a node agent serves the gateway and its peers.
	AnnotationEndpoint = "hutch.dev/endpoint"
	// FinalizerNode keeps a Box until the node that holds it has removed it from its hutchd.
	FinalizerNode = "hutch.dev/node-cleanup"
	// TaintHutchdDown is put on a node whose hutchd does not answer: no new boxes go there.
	TaintHutchdDown = "hutch.dev/hutchd-down"
	// ConditionHutchd is the node condition the node agent keeps.
	ConditionHutchd = "HutchdReady"
	// PodPrefix + box name = the box pod's name.
	PodPrefix = "box-"
)

var (
	BoxGVR         = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "boxes"}
	BoxTemplateGVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "boxtemplates"}
	BoxSnapshotGVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "boxsnapshots"}
	BoxPoolGVR     = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "boxpools"}
	BoxGVK         = schema.GroupVersionKind{Group: Group, Version: Version, Kind: "Box"}
)

// Phases of a Box.
const (
	PhasePending   = "Pending"   // waiting for the scheduler to bind its pod
	PhaseScheduled = "Scheduled" // bound to a node; its node agent has not acted yet
	PhaseCreating  = "Creating"
	PhaseRunning   = "Running"
	PhaseStopping  = "Stopping"
	PhaseStopped   = "Stopped"
	PhaseLost      = "Lost" // its node (or the node's hutchd) is gone; it comes back with it
	PhaseFailed    = "Failed"
)

type Box struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BoxSpec   `json:"spec"`
	Status            BoxStatus `json:"status,omitempty"`
}

type BoxSpec struct {
	Template  string        `json:"template,omitempty"`
	Source    *BoxSource    `json:"source,omitempty"`
	Resources BoxResources  `json:"resources,omitempty"`
	RunState  string        `json:"runState,omitempty"`
	Placement *BoxPlacement `json:"placement,omitempty"`
}

type BoxSource struct {
	Snapshot string `json:"snapshot,omitempty"`
	Box      string `json:"box,omitempty"`
}

type BoxResources struct {
	CPUs      int64 `json:"cpus,omitempty"`
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	DiskMiB   int64 `json:"diskMiB,omitempty"`
}

type BoxPlacement struct {
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	NearBox      string            `json:"nearBox,omitempty"`
}

type BoxStatus struct {
	Phase              string             `json:"phase,omitempty"`
	NodeName           string             `json:"nodeName,omitempty"`
	PodName            string             `json:"podName,omitempty"`
	BoxID              string             `json:"boxID,omitempty"`
	Message            string             `json:"message,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Snapshot           *SnapshotRef       `json:"snapshot,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

type SnapshotRef struct {
	Name    string `json:"name,omitempty"`
	Node    string `json:"node,omitempty"`
	Durable bool   `json:"durable,omitempty"`
}

// Running says whether the box is asked to run (the default).
func (b *Box) Running() bool { return b.Spec.RunState == "" || b.Spec.RunState == "Running" }

// CPUs and MemoryMiB with the CRD's defaults applied (an object read before defaulting, as in
// unit tests, has zeros).
func (b *Box) CPUs() int64 {
	if b.Spec.Resources.CPUs > 0 {
		return b.Spec.Resources.CPUs
	}
	return 1
}

func (b *Box) MemoryMiB() int64 {
	if b.Spec.Resources.MemoryMiB > 0 {
		return b.Spec.Resources.MemoryMiB
	}
	return 512
}

// Parent is the box this one should stay near: the box it forks, or its placement hint.
func (b *Box) Parent() string {
	if b.Spec.Source != nil && b.Spec.Source.Box != "" {
		return b.Spec.Source.Box
	}
	if b.Spec.Placement != nil {
		return b.Spec.Placement.NearBox
	}
	return ""
}

type BoxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BoxTemplateSpec   `json:"spec"`
	Status            BoxTemplateStatus `json:"status,omitempty"`
}

type BoxTemplateSpec struct {
	Recipe  string `json:"recipe,omitempty"`
	BuildOn string `json:"buildOn,omitempty"`
}

type BoxTemplateStatus struct {
	Digest    string         `json:"digest,omitempty"`
	SizeBytes int64          `json:"sizeBytes,omitempty"`
	Nodes     []TemplateNode `json:"nodes,omitempty"`
}

type TemplateNode struct {
	Name    string `json:"name"`
	State   string `json:"state,omitempty"`
	Message string `json:"message,omitempty"`
}

// FromUnstructured converts an object read through the dynamic client into out.
func FromUnstructured(u *unstructured.Unstructured, out any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("cannot read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// BoxFrom converts an informer's object (an *unstructured.Unstructured) into a Box.
func BoxFrom(obj any) (*Box, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("expected an unstructured Box, got %T", obj)
	}
	var b Box
	if err := FromUnstructured(u, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
