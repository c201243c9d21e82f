// Package tlsflags gives hutch's Kubernetes programs one way to serve and to dial over TLS: a
// certificate and key to serve with, a CA bundle to verify peers with, and an explicit
// --plain-http for loopback tests. API keys and node tokens cross these connections, so plain
// HTTP is never the silent default.
package tlsflags

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

type Flags struct {
	Cert, Key, CA string
	Plain         bool
}

// Register adds --tls-cert, --tls-key, --ca-file and --plain-http to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Cert, "tls-cert", "", "PEM certificate to serve HTTPS with")
	fs.StringVar(&f.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.CA, "ca-file", "", "PEM CA bundle that node agents' certificates are checked against (default: the system's)")
	fs.BoolVar(&f.Plain, "plain-http", false, "Serve plain HTTP and dial node agents over it: API keys and tokens cross in clear (loopback tests only)")
}

// Check says what is missing, naming the flags to pass.
func (f *Flags) Check(program string) error {
	if f.Plain {
		if f.Cert != "" || f.Key != "" {
			return fmt.Errorf("%s: --plain-http and --tls-cert/--tls-key exclude each other", program)
		}
		return nil
	}
	if f.Cert == "" || f.Key == "" {
		return fmt.Errorf("%s: --tls-cert and --tls-key are required (keys and tokens cross this listener); --plain-http turns TLS off for a loopback test", program)
	}
	if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
		return fmt.Errorf("%s: cannot load --tls-cert %s with --tls-key %s: %w", program, f.Cert, f.Key, err)
	}
	return nil
}

// Scheme is the URL scheme this program serves.
func (f *Flags) Scheme() string {
	if f.Plain {
		return "http"
	}
	return "https"
}

// Serve serves h on ln, over TLS unless --plain-http.
func (f *Flags) Serve(srv *http.Server, ln net.Listener) error {
	if f.Plain {
		return srv.Serve(ln)
	}
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return srv.ServeTLS(ln, f.Cert, f.Key)
}

// Transport dials node agents: verified against --ca-file (or the system's roots).
func (f *Flags) Transport() (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 0
	t.IdleConnTimeout = 90 * time.Second
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA == "" {
		return t, nil
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("cannot read --ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("--ca-file " + f.CA + " holds no PEM certificate")
	}
	t.TLSClientConfig.RootCAs = pool
	return t, nil
}
