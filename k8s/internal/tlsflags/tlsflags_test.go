package tlsflags

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSIsRequiredUnlessPlainHTTPIsAskedFor(t *testing.T) {
	var f Flags
	err := f.Check("hutch-gateway")
	if err == nil || !strings.Contains(err.Error(), "--tls-cert and --tls-key are required") || !strings.Contains(err.Error(), "--plain-http") {
		t.Fatalf("no certificate and no --plain-http: %v", err)
	}
	f.Plain = true
	if err := f.Check("hutch-gateway"); err != nil || f.Scheme() != "http" {
		t.Fatalf("--plain-http alone: %v (scheme %s)", err, f.Scheme())
	}
	f.Cert, f.Key = "c.pem", "k.pem"
	if err := f.Check("hutch-gateway"); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("--plain-http with a certificate: %v", err)
	}
}

func TestUnreadableFilesAreNamed(t *testing.T) {
	dir := t.TempDir()
	f := Flags{Cert: filepath.Join(dir, "missing.crt"), Key: filepath.Join(dir, "missing.key")}
	if err := f.Check("hutch-node"); err == nil || !strings.Contains(err.Error(), "missing.crt") {
		t.Fatalf("a missing certificate: %v", err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Flags{CA: junk}).Transport(); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("a CA file without certificates: %v", err)
	}
	if _, err := (&Flags{CA: filepath.Join(dir, "none.pem")}).Transport(); err == nil || !strings.Contains(err.Error(), "--ca-file") {
		t.Fatalf("a CA file that does not exist: %v", err)
	}
	tr, err := (&Flags{}).Transport()
	if err != nil || tr.TLSClientConfig.RootCAs != nil {
		t.Fatalf("no --ca-file means the system's roots: %v", err)
	}
}
