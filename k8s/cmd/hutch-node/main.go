// hutch-node: hutch's node agent beside one hutchd (docs/capacity.md).
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"hutch.dev/k8s/internal/kube"
	"hutch.dev/k8s/internal/node"
)

func main() {
	var cfg node.Config
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else in-cluster)")
	flag.StringVar(&cfg.NodeName, "node-name", "", "This node's name (the Node object it registers)")
	flag.StringVar(&cfg.Socket, "hutchd-socket", "/run/hutch/hutchd.sock", "hutchd's API socket")
	flag.StringVar(&cfg.ImageCache, "image-cache", "/var/cache/hutch", "hutchd's --image-cache (fetched templates land in its images/)")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:7443", "ADDR:PORT of the agent's listener (peers' chunks, the gateway's proxy)")
	flag.StringVar(&cfg.Advertise, "advertise", "", "URL others reach the listener at (default https://LISTEN, http:// with --plain-http)")
	tokenFile := flag.String("token-file", "", "File with the token node agents and the gateway share")
	flag.Int64Var(&cfg.CPUs, "cpus", 2, "CPUs this node offers boxes")
	flag.Int64Var(&cfg.MemoryMiB, "memory-mib", 4096, "Memory (MiB) this node offers boxes")
	flag.Int64Var(&cfg.MaxPods, "max-boxes", 110, "Most box pods on this node")
	cfg.TLS.Register(flag.CommandLine)
	flag.Parse()
	if err := cfg.TLS.Check("hutch-node"); err != nil {
		log.Fatal(err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.TLS.Scheme() + "://" + cfg.Listen
	}
	if err := node.EndpointURL(cfg.Advertise); err != nil {
		log.Fatal(err)
	}
	if *tokenFile == "" {
		log.Fatal("hutch-node: --token-file is required (the secret the gateway and the other node agents present)")
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		log.Fatalf("hutch-node: %v", err)
	}
	cfg.Token = strings.TrimSpace(string(tok))
	c, err := kube.Connect(*kubeconfig, 50, "hutch-node/"+cfg.NodeName)
	if err != nil {
		log.Fatal(err)
	}
	a, err := node.New(cfg, c)
	if err != nil {
		log.Fatalf("hutch-node: %v", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		log.Fatalf("hutch-node: %v", err)
	}
}
