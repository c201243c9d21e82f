// hutch-controller: the Box controller (docs/capacity.md). It creates one box pod per running
// Box and lets the stock kube-scheduler place it; node agents (hutch-node) do the rest.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	"hutch.dev/k8s/internal/boxpod"
	"hutch.dev/k8s/internal/controller"
	"hutch.dev/k8s/internal/kube"
)

func main() {
	o := boxpod.DefaultOptions()
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else in-cluster)")
	workers := flag.Int("workers", 4, "Boxes reconciled in parallel")
	qps := flag.Float64("qps", 100, "Requests per second to the apiserver")
	flag.StringVar(&o.Image, "launcher-image", o.Image, "Image of the box pod's launcher container")
	flag.Int64Var(&o.VMMOverheadMiB, "vmm-overhead-mib", o.VMMOverheadMiB, "MiB added to a box's memory for its VMM")
	flag.Int64Var(&o.MemoryRequestPercent, "memory-request-percent", o.MemoryRequestPercent, "Memory request as a percentage of the limit (below 100 overcommits)")
	flag.Int64Var(&o.CPURequestMilli, "cpu-request-milli", o.CPURequestMilli, "CPU request per vCPU in millicores (below 1000 overcommits)")
	flag.StringVar(&o.ForkAffinity, "fork-affinity", o.ForkAffinity, "required or preferred: how a fork is held to its parent's node")
	var fw, tw int
	flag.IntVar(&fw, "fork-affinity-weight", int(o.ForkAffinityWeight), "Preferred weight toward a fork's parent node (1-100)")
	flag.IntVar(&tw, "template-affinity-weight", int(o.TemplateAffinityWeight), "Preferred weight toward nodes holding the template (1-100)")
	flag.Int64Var(&o.LostAfterSeconds, "lost-after", o.LostAfterSeconds, "Seconds a box pod stays on an unreachable node before eviction")
	flag.Parse()
	o.ForkAffinityWeight, o.TemplateAffinityWeight = int32(fw), int32(tw)
	c, err := kube.Connect(*kubeconfig, float32(*qps), "hutch-controller", true)
	if err != nil {
		log.Fatal(err)
	}
	ctl, err := controller.New(c, o)
	if err != nil {
		log.Fatalf("hutch-controller: %v", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := ctl.Run(ctx, *workers); err != nil {
		log.Fatal(err)
	}
	log.Printf("hutch-controller: stopped (%d box pods created)", ctl.Created.Load())
}
