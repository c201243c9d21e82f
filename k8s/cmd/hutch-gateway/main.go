// hutch-gateway: hutch's API in front of a cluster of hutchd nodes (docs/capacity.md).
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"hutch.dev/k8s/internal/gateway"
	"hutch.dev/k8s/internal/kube"
	"hutch.dev/k8s/internal/tlsflags"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else in-cluster)")
	listen := flag.String("listen", "127.0.0.1:8080", "ADDR:PORT to serve hutch's API on")
	keysFile := flag.String("keys", "", "File of 'KEY NAMESPACE' lines: who may call, and whose boxes they see")
	tokenFile := flag.String("node-token-file", "", "File with the token the node agents expect")
	wait := flag.Duration("wait", 10*time.Minute, "How long a create, start or stop waits for the box before answering 504")
	var tf tlsflags.Flags
	tf.Register(flag.CommandLine)
	flag.Parse()
	if *keysFile == "" || *tokenFile == "" {
		log.Fatal("hutch-gateway: --keys and --node-token-file are required")
	}
	if err := tf.Check("hutch-gateway"); err != nil {
		log.Fatal(err)
	}
	transport, err := tf.Transport()
	if err != nil {
		log.Fatalf("hutch-gateway: %v", err)
	}
	kt, err := os.ReadFile(*keysFile)
	if err != nil {
		log.Fatal(err)
	}
	keys, err := gateway.ParseKeys(string(kt))
	if err != nil {
		log.Fatal(err)
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		log.Fatal(err)
	}
	c, err := kube.Connect(*kubeconfig, 50, "hutch-gateway")
	if err != nil {
		log.Fatal(err)
	}
	g := gateway.New(c, keys, strings.TrimSpace(string(tok)))
	g.Wait, g.Transport = *wait, transport
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("hutch-gateway: cannot listen on %s: %v", *listen, err)
	}
	log.Printf("hutch-gateway: serving %s on %s", tf.Scheme(), *listen)
	log.Fatal(tf.Serve(&http.Server{Handler: g}, ln))
}
