package boxpod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "hutch.dev/k8s/api/v1alpha1"
)

func box(name string) *v1.Box {
	return &v1.Box{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u1"},
		Spec: v1.BoxSpec{Template: "base", Resources: v1.BoxResources{CPUs: 2, MemoryMiB: 1024}}}
}

func TestRequestsHoldTheBoxAndItsVMM(t *testing.T) {
	o := DefaultOptions()
	p := Build(box("a"), "", o)
	c := p.Spec.Containers[0]
	if got := c.Resources.Requests.Cpu().MilliValue(); got != 2000 {
		t.Errorf("cpu request %dm, want 2000m", got)
	}
	if got := c.Resources.Limits.Memory().Value() >> 20; got != 1024+64 {
		t.Errorf("memory limit %d MiB, want 1088", got)
	}
	o.MemoryRequestPercent, o.CPURequestMilli = 50, 250
	c = Build(box("a"), "", o).Spec.Containers[0]
	if got := c.Resources.Requests.Memory().Value() >> 20; got != 544 {
		t.Errorf("memory request %d MiB at 50%%, want 544", got)
	}
	if got := c.Resources.Requests.Cpu().MilliValue(); got != 500 {
		t.Errorf("cpu request %dm at 250m per vCPU, want 500m", got)
	}
	if p.Name != "box-a" || p.OwnerReferences[0].UID != "u1" || !*p.OwnerReferences[0].Controller {
		t.Errorf("pod %s is not named and owned after its box: %+v", p.Name, p.OwnerReferences)
	}
	if p.Spec.NodeSelector[v1.LabelNode] != "true" {
		t.Errorf("the pod may land on a node without hutchd: %v", p.Spec.NodeSelector)
	}
	if a := p.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("the launcher gets an apiserver token it never uses: automount %v", a)
	}
}

func TestAStoppedBoxResumesOnItsSnapshotsNodeUntilItIsDurable(t *testing.T) {
	b := box("a")
	b.Status.Snapshot = &v1.SnapshotRef{Name: "s", Node: "n3"}
	na := Build(b, "", DefaultOptions()).Spec.Affinity.NodeAffinity
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || req.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "n3" {
		t.Fatalf("a node-local snapshot must pin the pod to n3: %+v", na)
	}
	b.Status.Snapshot.Durable = true
	na = Build(b, "", DefaultOptions()).Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		t.Fatalf("a durable snapshot must not pin the pod: %+v", na)
	}
	if na.PreferredDuringSchedulingIgnoredDuringExecution[0].Preference.MatchExpressions[0].Values[0] != "n3" {
		t.Fatalf("a durable snapshot should still prefer its node: %+v", na)
	}
}

func TestForksPreferOrRequireTheirParentsNode(t *testing.T) {
	b := box("child")
	b.Spec.Source = &v1.BoxSource{Box: "parent"}
	o := DefaultOptions()
	na := Build(b, "n7", o).Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil || na.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 100 {
		t.Fatalf("preferred fork affinity expected: %+v", na)
	}
	o.ForkAffinity = "required"
	na = Build(b, "n7", o).Spec.Affinity.NodeAffinity
	if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r == nil || r.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "n7" {
		t.Fatalf("required fork affinity expected: %+v", na)
	}
	// Template locality is a preference of its own, never a requirement.
	last := na.PreferredDuringSchedulingIgnoredDuringExecution[len(na.PreferredDuringSchedulingIgnoredDuringExecution)-1]
	if last.Preference.MatchExpressions[0].Key != v1.LabelTemplatePrefix+"base" || last.Preference.MatchExpressions[0].Operator != corev1.NodeSelectorOpIn {
		t.Fatalf("template locality missing: %+v", last)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.ForkAffinity = "sometimes"
	if o.Validate() == nil {
		t.Fatal("a bad fork affinity was accepted")
	}
	o = DefaultOptions()
	o.MemoryRequestPercent = 0
	if o.Validate() == nil {
		t.Fatal("a 0 % memory request was accepted")
	}
}
